"""Clock & math: the current time anywhere, and arithmetic without eval()."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from toolsets.base import ToolFailure, Toolset, tool


def _time_summary(result: Any) -> str:
    return f"{result['display']} {result['abbreviation']} in {result['timezone']}"


@tool(
    display_name="Current time",
    timeout_s=5,
    cache_ttl_s=0,  # the time is never reused
    summarize=_time_summary,
    status_text=lambda args: f"Checking the time in {args.get('timezone', 'UTC')}…",
)
def current_time(
    timezone: Annotated[str, "IANA timezone name, e.g. Asia/Tokyo or Europe/Paris"] = "UTC",
) -> dict[str, str]:
    """Get the current date and time in a timezone."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        close = sorted(name for name in available_timezones() if timezone.lower() in name.lower())[:5]
        hint = f" Did you mean: {', '.join(close)}?" if close else " Use an IANA name such as Europe/Paris."
        raise ValueError(f"Unknown timezone {timezone!r}.{hint}") from None
    now = datetime.now(UTC).astimezone(zone)
    offset = now.strftime("%z")
    return {
        "timezone": timezone,
        "iso": now.isoformat(timespec="seconds"),
        "display": now.strftime("%H:%M"),
        "date": now.strftime("%A, %-d %B %Y"),
        "utc_offset": f"{offset[:3]}:{offset[3:]}",
        "abbreviation": now.tzname() or "",
    }


_BINARY: dict[type[ast.operator], Callable[[Any, Any], object]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], object]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_ROUND_DIGITS = 100


def _round(value: Any, ndigits: Any = None) -> Any:
    # round(1, -10**9) would compute 10**(10**9) while holding the GIL.
    if ndigits is not None and abs(ndigits) > MAX_ROUND_DIGITS:
        raise ValueError(f"round() takes at most {MAX_ROUND_DIGITS} digits")
    return round(value, ndigits)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": _round,
    "floor": math.floor,
    "ceil": math.ceil,
    "log": math.log,
    "log10": math.log10,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "min": min,
    "max": max,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
MAX_EXPONENT = 1000
# About 3,000 digits: past any real calculation, below Python's int-to-str limit (4,300 digits),
# and small enough that no chain of operations on such numbers can stall the worker.
MAX_BITS = 10_000
MAX_LENGTH = 500


def evaluate(expression: str) -> int | float:
    """Evaluates arithmetic by walking the syntax tree; names, attributes and calls other than
    a short list of math functions are refused, and huge powers are capped."""
    if len(expression) > MAX_LENGTH:
        raise ValueError(f"Expression longer than {MAX_LENGTH} characters")
    text = expression.replace("^", "**").replace("×", "*").replace("÷", "/")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"Not an arithmetic expression: {expression!r}") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> int | float:
    # bool is an int but not a number here: `True + 1` is refused.
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"Exponent larger than {MAX_EXPONENT}")
        # A small exponent on a big base is still huge: ((9^999)^999)^999 never finishes.
        if isinstance(node.op, ast.Pow) and isinstance(left, int) and (abs(left).bit_length() - 1) * right > MAX_BITS:
            raise ValueError("Result too large")
        try:
            return _checked(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ValueError("Division by zero") from None
        except OverflowError:
            raise ValueError("Result too large") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        try:
            return _checked(_FUNCTIONS[node.func.id](*(_eval(arg) for arg in node.args)))
        except OverflowError:
            raise ValueError("Result too large") from None
    raise ValueError(f"Unsupported element in expression: {ast.dump(node)[:60]}")


def _checked(value: object) -> int | float:
    if isinstance(value, int):
        if value.bit_length() > MAX_BITS:
            raise ValueError("Result too large")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("Result is not a finite number")
        return value
    # A negative number to a fractional power is complex; nothing else can come out of the
    # operators and functions above.
    raise ValueError("Result is not a real number")


@tool(
    display_name="Calculate",
    timeout_s=5,
    summarize=lambda result: f"{result['expression']} = {result['result']}",
    status_text=lambda args: f"Calculating {args.get('expression', '')}…",
)
def calculate(expression: Annotated[str, "Arithmetic expression, e.g. (3 + 4) * 2 or sqrt(2)"]) -> dict[str, Any]:
    """Evaluate an arithmetic expression exactly."""
    try:
        value = evaluate(expression)
    except ValueError as exc:
        # The expression is the caller's: a bad one is bad input (an API 400), not a tool failure.
        raise ToolFailure(str(exc), error_type="validation_error") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return {"expression": expression, "result": value}


toolset = Toolset(
    id="clock_math",
    name="Clock & math",
    short_name="Clock & math",
    description="The current time in any timezone, and exact arithmetic.",
    tools=[current_time, calculate],
)
