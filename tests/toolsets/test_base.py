from __future__ import annotations

from typing import Annotated, Literal

import pytest

from toolsets.base import (
    ToolContext,
    Toolset,
    humanize,
    qualified_name,
    schema_for,
    split_qualified_name,
    tool,
)


def test_annotated_description_lands_in_the_schema() -> None:
    def search(query: Annotated[str, "What to look for"]) -> str:
        return query

    schema, _ = schema_for(search)

    assert schema["properties"]["query"] == {"type": "string", "description": "What to look for"}
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False


def test_parameters_with_defaults_are_not_required_and_carry_the_default() -> None:
    def search(query: str, limit: int = 10, exact: bool = False) -> str:
        return query

    schema, _ = schema_for(search)

    assert schema["required"] == ["query"]
    assert schema["properties"]["limit"] == {"type": "integer", "default": 10}
    assert schema["properties"]["exact"] == {"type": "boolean", "default": False}


def test_a_function_without_required_parameters_has_no_required_key() -> None:
    def now(zone: str = "UTC") -> str:
        return zone

    schema, _ = schema_for(now)

    assert "required" not in schema


def test_literal_becomes_an_enum() -> None:
    def sort(order: Literal["asc", "desc"], size: Literal[1, 2, 3] = 1) -> str:
        return order

    schema, _ = schema_for(sort)

    assert schema["properties"]["order"] == {"type": "string", "enum": ["asc", "desc"]}
    assert schema["properties"]["size"]["type"] == "integer"
    assert schema["properties"]["size"]["enum"] == [1, 2, 3]


def test_list_of_strings_becomes_an_array_of_strings() -> None:
    def tag(labels: Annotated[list[str], "Labels to add"]) -> str:
        return ""

    schema, _ = schema_for(tag)

    assert schema["properties"]["labels"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Labels to add",
    }


def test_optional_is_the_inner_type_and_not_required_when_defaulting_to_none() -> None:
    def find(name: str | None = None, ratio: float | None = None) -> str:
        return ""

    schema, _ = schema_for(find)

    assert schema["properties"]["name"] == {"type": "string"}
    assert schema["properties"]["ratio"] == {"type": "number"}
    assert "required" not in schema


def test_union_of_several_types_becomes_any_of() -> None:
    def pick(value: int | str) -> str:
        return ""

    schema, _ = schema_for(pick)

    assert schema["properties"]["value"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}


def test_tool_context_parameter_is_left_out_and_sets_wants_context() -> None:
    @tool()
    def whoami(ctx: ToolContext, loud: bool = False) -> str:
        """Say who is calling."""
        return str(ctx.user_id)

    assert whoami.wants_context is True
    assert list(whoami.parameters["properties"]) == ["loud"]


def test_tool_without_context_does_not_want_one() -> None:
    @tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    assert echo.wants_context is False


def test_tool_takes_description_from_first_docstring_line_and_name_from_function() -> None:
    @tool(timeout_s=3, side_effects=True)
    def send_email(to: str) -> str:
        """Send an email.

        Longer explanation that the model never sees.
        """
        return to

    assert send_email.name == "send_email"
    assert send_email.display_name == "Send email"
    assert send_email.description == "Send an email."
    assert send_email.timeout_s == 3
    assert send_email.side_effects is True


def test_tool_without_docstring_is_described_by_its_humanized_name() -> None:
    @tool(display_name="Lookup")
    def look_up_word(word: str) -> str:
        return word

    assert look_up_word.description == "Look up word"
    assert look_up_word.display_name == "Lookup"


def test_async_tool_is_detected() -> None:
    @tool()
    async def wait(seconds: float) -> str:
        """Wait."""
        return ""

    assert wait.is_async is True


def test_toolset_assigns_its_id_and_a_default_rate_limit_key_to_its_tools() -> None:
    @tool()
    def one() -> str:
        """One."""
        return "1"

    @tool(rate_limit_key="shared")
    def two() -> str:
        """Two."""
        return "2"

    toolset = Toolset(id="numbers", name="Numbers", description="", tools=[one, two])

    assert one.toolset_id == "numbers"
    assert one.rate_limit_key == "numbers.one"
    assert two.rate_limit_key == "shared"
    assert toolset.get("two") is two
    assert toolset.get("three") is None


@pytest.mark.parametrize("hint", [bytes, object, complex])
def test_unsupported_parameter_type_raises_type_error(hint: type) -> None:
    def bad(value): ...  # type: ignore[no-untyped-def]

    bad.__annotations__ = {"value": hint}

    with pytest.raises(TypeError, match="Unsupported tool parameter type"):
        schema_for(bad)


def test_tool_decorator_rejects_unsupported_types_at_definition_time() -> None:
    with pytest.raises(TypeError):

        @tool()
        def upload(data: bytes) -> str:
            """Upload."""
            return ""


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("SOME_TOOL_NAME", "Some tool name"),
        ("snake_case", "Snake case"),
        ("camelCase", "Camel case"),
        ("kebab-case-name", "Kebab case name"),
        ("x", "X"),
        ("", ""),
    ],
)
def test_humanize(name: str, expected: str) -> None:
    assert humanize(name) == expected


def test_qualified_name_round_trips() -> None:
    name = qualified_name("clock_math", "current_time")

    assert name == "toolset__clock_math__current_time"
    assert split_qualified_name(name) == ("clock_math", "current_time")


@pytest.mark.parametrize(
    "name",
    [
        "current_time",
        "clock_math__current_time",
        "other__clock_math__current_time",
        "toolset____current_time",
        "toolset__clock_math__",
        "toolset__a__b__c",
        "",
    ],
)
def test_split_qualified_name_rejects_bad_names(name: str) -> None:
    assert split_qualified_name(name) is None
