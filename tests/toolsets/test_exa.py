from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from toolsets.base import Tool, ToolContext, ToolFailure
from toolsets.exa import tools
from toolsets.exa import toolset as exa_toolset
from toolsets.exa.fake_server import FAKE_API_KEY, FakeExa, start_fake_exa
from toolsets.exa.tools import answer, find_similar, get_contents, search

ROOT = Path(__file__).resolve().parents[2]
RESULT_KEYS = {"title", "url", "published_date", "author", "snippet"}


@pytest.fixture
def exa() -> Iterator[FakeExa]:
    with FakeExa(slow_s=5) as fake:
        yield fake


@pytest.fixture
def ctx(exa: FakeExa) -> ToolContext:
    return ToolContext(api_key=FAKE_API_KEY, settings={"base_url": exa.base_url})


def _summary(tool_: Tool, result: Any) -> str:
    assert tool_.summarize is not None
    return tool_.summarize(result)


def _status(tool_: Tool, args: dict[str, Any]) -> str:
    assert tool_.status_text is not None
    return tool_.status_text(args)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_search_returns_normalised_ai_news_with_titles_and_urls(ctx: ToolContext) -> None:
    result = await search.func(ctx, "latest news about AI")

    assert result["query"] == "latest news about AI"
    assert len(result["results"]) == 5
    first = result["results"][0]
    assert set(first) == RESULT_KEYS
    assert first["title"] == "Open-weight language models close the gap with frontier systems"
    assert first["url"] == "https://news.example.com/2026/05/open-weight-models-close-gap"
    assert first["published_date"] == "2026-05-12"
    assert first["author"] == "Maya Chen"
    assert first["snippet"].startswith("A new round of benchmark results")
    for item in result["results"]:
        assert item["title"]
        assert item["url"].startswith("https://")
        assert "AI" in item["title"] or "models" in item["title"]


async def test_search_sends_the_key_header_and_exa_request_body(ctx: ToolContext, exa: FakeExa) -> None:
    await search.func(ctx, "django channels", num_results=3)

    request = exa.requests[-1]
    assert request.path == "/search"
    assert request.headers["x-api-key"] == FAKE_API_KEY
    assert request.body == {
        "query": "django channels",
        "numResults": 3,
        "type": "auto",
        "contents": {"text": {"maxCharacters": 2 * tools.SNIPPET_CHARS}},
    }


@pytest.mark.parametrize(("asked", "sent"), [(50, 10), (10, 10), (0, 1), (-3, 1)])
async def test_num_results_is_capped_to_one_through_ten(ctx: ToolContext, exa: FakeExa, asked: int, sent: int) -> None:
    result = await search.func(ctx, "django channels", num_results=asked)

    assert exa.requests[-1].body["numResults"] == sent
    assert len(result["results"]) == sent


def test_long_page_text_is_cut_to_a_short_snippet() -> None:
    item = tools._normalise({"url": "https://a.example.com/x", "title": None, "text": "word " * 1000})

    assert len(item["snippet"]) <= tools.SNIPPET_CHARS
    assert item["snippet"].endswith("…")
    assert item["title"] == "https://a.example.com/x"
    assert item["published_date"] is None


async def test_empty_query_is_refused_before_calling_exa(ctx: ToolContext, exa: FakeExa) -> None:
    with pytest.raises(ValueError, match="empty"):
        await search.func(ctx, "   ")

    assert exa.requests == []


async def test_find_similar_returns_other_pages_and_sends_url(ctx: ToolContext, exa: FakeExa) -> None:
    source = "https://docs.example.dev/django/channels-websockets"

    result = await find_similar.func(ctx, source, num_results=3)

    assert result["url"] == source
    assert [item["url"] for item in result["results"]][:2] == [
        "https://blog.example.dev/celery-django-production",
        "https://blog.example.dev/htmx-django-partials",
    ]
    assert len(result["results"]) == 3
    assert source not in [item["url"] for item in result["results"]]
    assert all(set(item) == RESULT_KEYS and item["title"] for item in result["results"])
    request = exa.requests[-1]
    assert request.path == "/findSimilar"
    assert request.headers["x-api-key"] == FAKE_API_KEY
    assert request.body["url"] == source
    assert request.body["numResults"] == 3


async def test_get_contents_returns_page_text_and_reports_pages_it_could_not_read(
    ctx: ToolContext, exa: FakeExa
) -> None:
    urls = ["https://blog.example.dev/htmx-django-partials", "https://other.example.com/notfound"]

    result = await get_contents.func(ctx, urls)

    assert [item["url"] for item in result["results"]] == [urls[0]]
    page = result["results"][0]
    assert page["title"] == "HTMX and Django: server-rendered interactivity without a SPA"
    assert page["text"].startswith("HTMX lets Django templates")
    assert result["failed"] == [{"url": urls[1], "error": "CRAWL_NOT_FOUND"}]
    request = exa.requests[-1]
    assert request.path == "/contents"
    assert request.headers["x-api-key"] == FAKE_API_KEY
    assert request.body == {"urls": urls, "text": {"maxCharacters": tools.CONTENTS_CHARS}}


async def test_get_contents_sends_at_most_ten_urls(ctx: ToolContext, exa: FakeExa) -> None:
    urls = [f"https://site.example.com/page-{i}" for i in range(15)]

    result = await get_contents.func(ctx, urls)

    assert exa.requests[-1].body["urls"] == urls[: tools.MAX_URLS]
    assert len(result["results"]) == tools.MAX_URLS


async def test_get_contents_refuses_non_http_urls(ctx: ToolContext, exa: FakeExa) -> None:
    with pytest.raises(ValueError, match="Not an http"):
        await get_contents.func(ctx, ["file:///etc/passwd"])

    assert exa.requests == []


async def test_answer_returns_text_and_citations(ctx: ToolContext, exa: FakeExa) -> None:
    result = await answer.func(ctx, "What is Django Channels?")

    assert result["answer"].startswith("Channels extends Django beyond HTTP")
    assert result["citations"][0] == {
        "title": "Django Channels: WebSockets in Django, explained",
        "url": "https://docs.example.dev/django/channels-websockets",
    }
    assert len(result["citations"]) == 3
    assert all(set(citation) == {"title", "url"} for citation in result["citations"])
    request = exa.requests[-1]
    assert request.path == "/answer"
    assert request.headers["x-api-key"] == FAKE_API_KEY
    assert request.body == {"query": "What is Django Channels?", "text": False}


CALLS: list[tuple[Any, tuple[Any, ...]]] = [
    (search, ("news",)),
    (find_similar, ("https://news.example.com/a",)),
    (get_contents, (["https://news.example.com/a"],)),
    (answer, ("news?",)),
]


@pytest.mark.parametrize(("tool_", "args"), CALLS, ids=[call[0].name for call in CALLS])
async def test_missing_api_key_is_permission_denied_without_calling_exa(
    exa: FakeExa, tool_: Any, args: tuple[Any, ...]
) -> None:
    ctx = ToolContext(api_key="", settings={"base_url": exa.base_url})

    with pytest.raises(ToolFailure, match="Exa API key not configured") as excinfo:
        await tool_.func(ctx, *args)

    assert excinfo.value.error_type == "permission_denied"
    assert exa.requests == []


@pytest.mark.parametrize(("tool_", "args"), CALLS, ids=[call[0].name for call in CALLS])
async def test_rejected_key_is_permission_denied_and_not_repeated(
    exa: FakeExa, tool_: Any, args: tuple[Any, ...]
) -> None:
    key = "sk-wrong-secret-1234"
    ctx = ToolContext(api_key=key, settings={"base_url": exa.base_url})

    with pytest.raises(ToolFailure) as excinfo:
        await tool_.func(ctx, *args)

    assert exa.requests[-1].headers["x-api-key"] == key
    assert excinfo.value.error_type == "permission_denied"
    assert str(excinfo.value) == "Exa rejected the API key"
    assert excinfo.value.retryable is False


def test_upstream_error_details_never_repeat_the_key() -> None:
    key = "sk-secret-5678"
    response = httpx.Response(400, json={"error": f"Bad request for key {key}: numResults too large"})

    with pytest.raises(ToolFailure) as excinfo:
        tools._raise_for_status(response, key)

    assert key not in str(excinfo.value)
    assert "numResults too large" in str(excinfo.value)
    assert excinfo.value.error_type == "execution_error"
    assert excinfo.value.retryable is False


@pytest.mark.parametrize(
    ("marker", "error_type", "message"),
    [
        ("[exa:429]", "rate_limit_error", "Exa rate limit reached"),
        ("[exa:500]", "execution_error", "Exa is unavailable (HTTP 500)"),
    ],
)
async def test_transient_exa_errors_are_retryable(ctx: ToolContext, marker: str, error_type: str, message: str) -> None:
    with pytest.raises(ToolFailure, match=re.escape(message)) as excinfo:
        await search.func(ctx, f"django {marker}")

    assert excinfo.value.error_type == error_type
    assert excinfo.value.retryable is True


async def test_malformed_json_is_an_execution_error(ctx: ToolContext) -> None:
    with pytest.raises(ToolFailure, match="malformed response") as excinfo:
        await answer.func(ctx, "django [exa:badjson]")

    assert excinfo.value.error_type == "execution_error"
    assert excinfo.value.retryable is False


async def test_slow_exa_is_a_retryable_timeout(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "HTTP_TIMEOUT_S", 0.3)

    with pytest.raises(ToolFailure, match="did not answer in time") as excinfo:
        await search.func(ctx, "django [exa:slow]")

    assert excinfo.value.error_type == "timeout_error"
    assert excinfo.value.retryable is True


async def test_unreachable_exa_is_a_retryable_execution_error() -> None:
    ctx = ToolContext(api_key=FAKE_API_KEY, settings={"base_url": f"http://127.0.0.1:{_free_port()}"})

    with pytest.raises(ToolFailure, match="Could not reach Exa") as excinfo:
        await search.func(ctx, "django")

    assert excinfo.value.error_type == "execution_error"
    assert excinfo.value.retryable is True


async def test_base_url_falls_back_to_the_default(exa: FakeExa, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "DEFAULT_BASE_URL", exa.base_url + "/")

    result = await search.func(ToolContext(api_key=FAKE_API_KEY), "django channels", num_results=2)

    assert len(result["results"]) == 2
    assert exa.requests[-1].path == "/search"


async def test_summaries_describe_the_results(ctx: ToolContext) -> None:
    found = await search.func(ctx, "latest news about AI")
    one = await search.func(ctx, "django channels", num_results=1)
    similar = await find_similar.func(ctx, "https://docs.example.dev/django/channels-websockets", num_results=3)
    pages = await get_contents.func(
        ctx, ["https://blog.example.dev/htmx-django-partials", "https://a.example.com/notfound"]
    )
    cited = await answer.func(ctx, "What is Django Channels?")

    assert _summary(search, found) == "5 results for “latest news about AI”"
    assert _summary(search, one) == "1 result for “django channels”"
    assert _summary(find_similar, similar) == "3 pages similar to docs.example.dev"
    assert _summary(get_contents, pages) == "Read 1 of 2 pages"
    assert _summary(answer, cited) == "Answer with 3 citations"


def test_status_texts_say_what_is_happening() -> None:
    assert _status(search, {"query": "django channels"}) == "Searching the web for “django channels”…"
    assert _status(find_similar, {"url": "https://news.example.com/a"}) == "Finding pages similar to news.example.com…"
    assert _status(get_contents, {"urls": ["https://news.example.com/a"]}) == "Reading news.example.com…"
    assert _status(get_contents, {"urls": ["https://a.example.com", "https://b.example.com"]}) == "Reading 2 pages…"
    assert _status(answer, {"query": "why?"}) == "Looking up an answer to “why?”…"


def test_search_schema_requires_query_and_defaults_num_results_without_ctx() -> None:
    schema = search.parameters

    assert search.wants_context is True
    assert set(schema["properties"]) == {"query", "num_results"}
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["num_results"]["type"] == "integer"
    assert schema["properties"]["num_results"]["default"] == 5
    assert get_contents.parameters["properties"]["urls"]["type"] == "array"
    assert get_contents.parameters["properties"]["urls"]["items"] == {"type": "string"}


def test_toolset_needs_a_key_and_has_four_read_only_tools() -> None:
    assert exa_toolset.id == "exa"
    assert exa_toolset.name == "Exa web search"
    assert exa_toolset.needs_api_key is True
    assert exa_toolset.default_settings == {"base_url": tools.DEFAULT_BASE_URL}
    assert [(t.name, t.display_name) for t in exa_toolset.tools] == [
        ("search", "Search"),
        ("find_similar", "Find similar"),
        ("get_contents", "Get contents"),
        ("answer", "Answer"),
    ]
    assert all(t.is_async and not t.side_effects and t.toolset_id == "exa" for t in exa_toolset.tools)


def test_fake_server_rejects_a_missing_key_and_unknown_paths() -> None:
    base_url, stop = start_fake_exa(api_key="k")
    try:
        with httpx.Client(base_url=base_url) as client:
            missing = client.post("/search", json={"query": "x"})
            unknown = client.post("/nope", json={}, headers={"x-api-key": "k"})
            ok = client.post("/search", json={"query": "x"}, headers={"x-api-key": "k"})
    finally:
        stop()

    assert (missing.status_code, missing.json()["error"]) == (401, "Invalid API key")
    assert unknown.status_code == 404
    assert ok.status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{base_url}/search", json={"query": "x"}, headers={"x-api-key": "k"})


def test_fake_server_runs_as_a_module() -> None:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "toolsets.exa.fake_server", "--port", str(port), "--api-key", "cli-key"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert f"http://127.0.0.1:{port}" in process.stdout.readline()
        response = httpx.post(
            f"http://127.0.0.1:{port}/answer", json={"query": "AI news"}, headers={"x-api-key": "cli-key"}
        )
    finally:
        process.terminate()
        process.wait(timeout=10)

    assert response.status_code == 200
    assert response.json()["citations"]
