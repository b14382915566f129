from __future__ import annotations

import math
import re

import pytest

from toolsets.clock_math.tools import MAX_LENGTH, calculate, current_time, evaluate


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2", 3),
        ("10 - 4", 6),
        ("6 * 7", 42),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("2 ** 10", 1024),
        ("2 ^ 10", 1024),
        ("-3 + 5", 2),
        ("-(2 + 3)", -5),
        ("+4", 4),
        ("(3 + 4) * 2", 14),
        ("3 + 4 * 2", 11),
        ("2 ** -1", 0.5),
        ("6 × 7 ÷ 2", 21),
        ("sqrt(16)", 4.0),
        ("max(1, 5, 3)", 5),
    ],
)
def test_evaluate_computes_arithmetic(expression: str, expected: float) -> None:
    assert evaluate(expression) == expected


def test_evaluate_knows_pi_and_sqrt() -> None:
    assert evaluate("pi") == math.pi
    assert evaluate("sqrt(2) * sqrt(2)") == pytest.approx(2)
    assert evaluate("2 * pi") == pytest.approx(2 * math.pi)


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "os",
        "os.system('ls')",
        "(1).__class__",
        "pi.real",
        "[x for x in range(3)]",
        "(lambda: 1)()",
        "'abc'",
        "'a' * 3",
        "sqrt(x=4)",
        "open('/etc/passwd')",
        "True + 1",
        "[1, 2]",
    ],
)
def test_evaluate_refuses_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(ValueError, match="Unsupported element"):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["9**9**9", "2 ** 100000", "10 ^ 1001"])
def test_evaluate_refuses_huge_exponents(expression: str) -> None:
    with pytest.raises(ValueError, match="Exponent larger than"):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["1 / 0", "1 // 0", "5 % 0", "1 / (2 - 2)"])
def test_division_by_zero_is_a_clear_value_error(expression: str) -> None:
    with pytest.raises(ValueError, match=r"^Division by zero$"):
        evaluate(expression)


def test_over_long_input_is_refused_before_parsing() -> None:
    with pytest.raises(ValueError, match=f"longer than {MAX_LENGTH} characters"):
        evaluate("1+" * MAX_LENGTH + "1")


@pytest.mark.parametrize("expression", ["1 +", "(2", "", "2 3"])
def test_syntax_errors_become_value_errors(expression: str) -> None:
    with pytest.raises(ValueError, match="Not an arithmetic expression"):
        evaluate(expression)


def test_calculate_returns_whole_floats_as_integers() -> None:
    result = calculate.func("sqrt(16)")

    assert result == {"expression": "sqrt(16)", "result": 4}
    assert isinstance(result["result"], int)


def test_calculate_keeps_fractions() -> None:
    assert calculate.func("1 / 4")["result"] == 0.25


def test_current_time_in_tokyo_has_the_documented_keys_and_offset() -> None:
    result = current_time.func("Asia/Tokyo")

    assert set(result) == {"timezone", "iso", "display", "date", "utc_offset", "abbreviation"}
    assert result["timezone"] == "Asia/Tokyo"
    assert result["utc_offset"] == "+09:00"
    assert result["iso"].endswith("+09:00")
    assert result["abbreviation"] == "JST"
    assert re.fullmatch(r"\d{2}:\d{2}", result["display"])
    assert re.fullmatch(r"[A-Z][a-z]+day, \d{1,2} [A-Z][a-z]+ \d{4}", result["date"])


def test_current_time_defaults_to_utc() -> None:
    result = current_time.func()

    assert result["timezone"] == "UTC"
    assert result["utc_offset"] == "+00:00"


def test_unknown_timezone_suggests_close_names() -> None:
    with pytest.raises(ValueError, match="Unknown timezone 'Tokyo'") as excinfo:
        current_time.func("Tokyo")

    assert "Did you mean: Asia/Tokyo" in str(excinfo.value)


def test_unknown_timezone_without_close_names_points_to_iana_names() -> None:
    with pytest.raises(ValueError, match="Use an IANA name"):
        current_time.func("Nowhere/Qqq")


def test_path_like_timezone_is_refused_not_read_from_disk() -> None:
    with pytest.raises(ValueError, match="Unknown timezone"):
        current_time.func("../../etc/passwd")


@pytest.mark.parametrize(
    "expression",
    [
        "(9^999)^999",
        "(((9^999)^999)^999)",
        "9^999 * 9^999 * 9^999 * 9^999",
        "10.0 ** 999",
    ],
)
def test_results_too_large_are_refused_quickly(expression: str) -> None:
    # Each exponent is under the cap, but the result would take minutes (holding the GIL) or
    # overflow; the JSON of an int past 4,300 digits cannot even be written.
    with pytest.raises(ValueError, match="Result too large"):
        evaluate(expression)


def test_round_refuses_absurd_digit_counts() -> None:
    # round(1, -10**9) computes 10**(10**9).
    with pytest.raises(ValueError, match="at most 100 digits"):
        evaluate("round(1, -10**9)")


def test_round_still_rounds() -> None:
    assert evaluate("round(1234.5678, 2)") == 1234.57
    assert evaluate("round(2.6)") == 3


def test_infinite_float_results_are_refused() -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        evaluate("1e308 * 10")


def test_large_but_reasonable_results_are_allowed() -> None:
    assert evaluate("1000 ^ 1000") == 1000**1000


@pytest.mark.parametrize("expression", ["(-8) ** (1/3)", "2 ** ((-8) ** 0.5)"])
def test_complex_results_are_refused(expression: str) -> None:
    with pytest.raises(ValueError, match="not a real number"):
        evaluate(expression)
