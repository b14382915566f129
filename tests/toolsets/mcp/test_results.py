"""Tool results as cards show them (toolsets.mcp.results, chat.tool_content): real results of
the SDK-built test server, shaped, stored and rendered — structured content once, audio
playable, files downloadable, resource links of any scheme opened through their server."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from chat import tool_content
from toolsets.executor import execute
from toolsets.mcp import results

pytestmark = pytest.mark.django_db(transaction=True)


async def _result(user: Any, tool: str) -> dict[str, Any]:
    done = await execute(f"toolset__mcp_t1__{tool}", {}, user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert done.ok, done.error
    result: dict[str, Any] = done.result
    return result


async def test_structured_content_sent_also_as_json_text_is_shown_once(stdio_server: Any, user: Any) -> None:
    result = await _result(user, "weather")
    assert result["structuredContent"] == {"temperature": 21, "unit": "C"}
    html = str(tool_content.render(result))
    assert html.count("temperature") == 1
    assert '"temperature": 21' in results.model_text(result)


async def test_audio_is_playable_and_downloadable(stdio_server: Any, user: Any) -> None:
    result = await _result(user, "sound")
    assert result["content"][0]["type"] == "audio"
    html = str(tool_content.render(result))
    assert '<audio controls preload="metadata" src="data:audio/wav;base64,' in html
    assert 'href="data:application/octet-stream;base64,' in html
    assert results.summary(result) == "An audio clip"
    assert "audio clip (audio/wav)" in results.model_text(result)


async def test_an_embedded_binary_resource_is_a_download_never_opened_inline(stdio_server: Any, user: Any) -> None:
    result = await _result(user, "attachment")
    (block,) = result["content"]
    assert (block["type"], block["uri"], block["size"]) == ("file", "files://report.bin", 8)
    html = str(tool_content.render(result))
    assert 'download="report.bin" href="data:application/octet-stream;base64,AAFiaW5hcnk="' in html
    assert "(not shown)" not in html


async def test_a_resource_link_of_another_scheme_opens_through_its_server(
    stdio_server: Any, user: Any, other_user: Any
) -> None:
    result = await _result(user, "linked")
    (block,) = result["content"]
    assert block["server"] == "mcp_t1"
    html = str(tool_content.render(result))
    assert 'href="/toolsets/mcp/t1/resource/?uri=notes%3A%2F%2Ftoday"' in html

    def page(who: Any, query: str) -> Any:
        client = Client()
        client.force_login(who)
        return client.get("/toolsets/mcp/t1/resource/" + query)

    shown = await sync_to_async(page)(user, "?uri=notes%3A%2F%2Ftoday")
    assert shown.status_code == 200
    body = shown.content.decode()
    # The server's text, escaped: its markup is never Tessera's.
    assert "Buy &lt;b&gt;milk&lt;/b&gt;" in body and "<b>milk" not in body
    bad = await sync_to_async(page)(user, "?uri=" + "x" * 3000)
    assert bad.status_code == 400
    assert (await sync_to_async(page)(user, "")).status_code == 400
    assert (await sync_to_async(page)(user, "?uri=notes%3A%2F%2Fnone")).status_code == 502
    unknown = await sync_to_async(Client().get)("/toolsets/mcp/t1/resource/?uri=notes%3A%2F%2Ftoday")
    assert unknown.status_code == 302  # to the sign-in page


async def test_a_result_that_breaks_the_declared_output_schema_is_a_clear_error(stdio_server: Any, user: Any) -> None:
    done = await execute("toolset__mcp_t1__liar", {}, user_id=user.pk, tool_call_id="c1", pre_approved=True)
    assert done.error is not None and done.error.type == "execution_error"
    assert "does not match the output schema it declared" in done.error.message
    assert "'hot' is not of type 'number'" in done.error.message


async def test_content_meant_for_one_audience_reaches_only_that_one(stdio_server: Any, user: Any) -> None:
    result = await _result(user, "audiences")
    assert results.model_text(result) == "For the model.\nFor both."
    html = str(tool_content.render(result))
    assert "For your eyes." in html and "For both." in html and "For the model." not in html
    assert results.summary(result) == "For your eyes."


def test_a_huge_first_line_is_summarised_promptly() -> None:
    # The header's Markdown clean-up backtracks over a whole line per emphasis mark: a server's
    # one-line result of many unclosed marks must not keep the worker busy for minutes.
    import time

    line = "**a " * 15_000
    started = time.monotonic()
    shown = results.summary({"content": [{"type": "text", "text": line}]})
    assert time.monotonic() - started < 1.0
    assert shown.startswith("a *a") and len(shown) <= results.MAX_SUMMARY_LINE
