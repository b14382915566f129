"""The pure parts of attaching resources: template expansion and the contents' checks (the
server round trips are in test_prompts.py)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from toolsets.files.models import FileLimits
from toolsets.mcp import prompts, resources

TEMPLATE = resources.Template("s", "S", "weather://{country}/{city}", "Weather", "", ("country", "city"))


def test_a_template_expands_its_variables_encoded() -> None:
    uri, errors = resources.expand(TEMPLATE, {"country": "fr", "city": "saint étienne/../x"})
    assert not errors
    assert uri == "weather://fr/saint%20%C3%A9tienne%2F..%2Fx"


@pytest.mark.parametrize(
    "values",
    [{"country": "fr"}, {"country": "fr", "city": "  "}, {"country": "fr", "city": "a\x00b"}, {"country": "x" * 5000}],
)
def test_missing_or_unusable_variables_are_named(values: dict[str, str]) -> None:
    uri, errors = resources.expand(TEMPLATE, values)
    assert uri == "" and errors


def test_a_template_with_too_many_variables_is_not_offered() -> None:
    many = "x://" + "/".join(f"{{v{i}}}" for i in range(resources.MAX_VARIABLES + 1))
    assert resources._template(Any, {"uriTemplate": many, "name": "many"}) is None  # type: ignore[arg-type]


def test_contents_are_checked_before_they_are_stored() -> None:
    limits = FileLimits(max_file_mb=1)
    with pytest.raises(resources.Unusable, match="not valid base64"):
        resources.content_bytes({"blob": "%%%"}, limits)
    with pytest.raises(resources.Unusable, match="larger than 1 MB"):
        resources.content_bytes({"blob": base64.b64encode(b"x" * (2 * 1024 * 1024)).decode()}, limits)
    with pytest.raises(resources.Unusable, match="larger than 1 MB"):
        resources.content_bytes({"text": "é" * (600 * 1024)}, limits)  # 1.2 MB once encoded
    with pytest.raises(resources.Unusable, match="neither text nor data"):
        resources.content_bytes({"uri": "a:b"}, limits)
    data, mime = resources.content_bytes({"text": "hi", "mimeType": "application/x-evil"}, limits)
    assert (data, mime) == (b"hi", "text/plain")  # text is text, whatever the server calls it


def test_prompt_arguments_are_the_prompts_own_and_required_ones_are_given() -> None:
    prompt = prompts.Prompt(
        "s",
        "S",
        "review",
        "Review",
        "",
        (prompts.Argument("language", "Language", "", True), prompts.Argument("focus", "Focus", "", False)),
    )
    values, errors = prompts.check_arguments(prompt, {"language": "", "focus": "speed", "extra": "x"})
    assert values == {"focus": "speed"} and errors == {"language": "Language is required."}
    values, errors = prompts.check_arguments(prompt, {"language": "x" * 5000})
    assert "language" in errors
    values, errors = prompts.check_arguments(prompt, {"language": "go"})
    assert values == {"language": "go"} and not errors
