"""Exa web search: search, similar pages, page contents and cited answers through Exa's HTTP API."""

from __future__ import annotations

import os
from typing import Annotated, Any

import httpx

from toolsets.base import ToolContext, ToolFailure, Toolset, plural, tool, url_host
from toolsets.sources import source

DEFAULT_BASE_URL = os.environ.get("EXA_BASE_URL") or "https://api.exa.ai"
MAX_RESULTS = 10
MAX_URLS = 10
SNIPPET_CHARS = 500
# get_contents exists to read a page, so it keeps more of it than a search snippet.
CONTENTS_CHARS = 3000
# Below each tool's timeout_s, so a slow Exa is reported as Exa's timeout, not the executor's.
HTTP_TIMEOUT_S = 15.0
CONTENTS_HTTP_TIMEOUT_S = 25.0
ANSWER_HTTP_TIMEOUT_S = 40.0


async def _post(ctx: ToolContext, path: str, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    api_key = ctx.api_key.strip()
    if not api_key:
        raise ToolFailure("Exa API key not configured", error_type="permission_denied")
    base_url = str(ctx.settings.get("base_url") or DEFAULT_BASE_URL).rstrip("/")
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=5.0)) as client:
            response = await client.post(
                base_url + path, json=payload, headers={"x-api-key": api_key, "accept": "application/json"}
            )
    except httpx.TimeoutException:
        raise ToolFailure("Exa did not answer in time", error_type="timeout_error", retryable=True) from None
    except httpx.HTTPError as exc:
        # Only the exception's type: some messages quote request headers, and so the key.
        raise ToolFailure(f"Could not reach Exa ({type(exc).__name__})", retryable=True) from None
    _raise_for_status(response, api_key)
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ToolFailure("Exa returned a malformed response")
    return data


def _raise_for_status(response: httpx.Response, api_key: str) -> None:
    status = response.status_code
    if status < 400:
        return
    if status in (401, 403):
        raise ToolFailure("Exa rejected the API key", error_type="permission_denied")
    if status == 429:
        raise ToolFailure("Exa rate limit reached; try again shortly", error_type="rate_limit_error", retryable=True)
    if status >= 500:
        raise ToolFailure(f"Exa is unavailable (HTTP {status})", retryable=True)
    try:
        detail = str(response.json().get("error") or "")
    except (ValueError, AttributeError):
        detail = ""
    detail = detail.replace(api_key, "[redacted]")[:200]
    raise ToolFailure(f"Exa refused the request (HTTP {status})" + (f": {detail}" if detail else ""))


def _clip(value: object, limit: int) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _normalise(item: dict[str, Any], text_chars: int = 0) -> dict[str, Any]:
    url = str(item.get("url") or item.get("id") or "")
    highlights = item.get("highlights") or []
    text = item.get("text") or " ".join(str(h) for h in highlights) or item.get("summary") or ""
    result = {
        "title": _clip(item.get("title"), 300) or url,
        "url": url,
        "published_date": str(item.get("publishedDate") or "")[:10] or None,
        "author": item.get("author") or None,
        "snippet": _clip(text, SNIPPET_CHARS),
    }
    if text_chars:
        result["text"] = _clip(text, text_chars)
    return result


def _results(data: dict[str, Any], text_chars: int = 0) -> list[dict[str, Any]]:
    items = data.get("results")
    if not isinstance(items, list):
        raise ToolFailure("Exa returned a malformed response")
    return [_normalise(item, text_chars) for item in items if isinstance(item, dict)]


def _page_sources(items: Any) -> list[dict[str, str]]:
    return [
        source(item.get("title"), url=item.get("url"), snippet=item.get("snippet") or item.get("text"))
        for item in items or []
        if isinstance(item, dict)
    ]


def _cap(num_results: int) -> int:
    return max(1, min(MAX_RESULTS, int(num_results)))


@tool(
    display_name="Search",
    timeout_s=20,
    # The same search within 10 minutes gets the same results (per Exa key).
    cache_ttl_s=600,
    cache_public=True,
    summarize=lambda result: f"{plural(len(result['results']), 'result')} for “{result['query']}”",
    sources=lambda result: _page_sources(result.get("results")),
    status_text=lambda args: f"Searching the web for “{args.get('query', '')}”…",
)
async def search(
    ctx: ToolContext,
    query: Annotated[str, "What to look for, phrased as a natural-language description of the page you want"],
    num_results: Annotated[int, "How many results to return, 1 to 10"] = 5,
) -> dict[str, Any]:
    """Search the web and get titles, URLs, dates and a snippet of each page."""
    if not query.strip():
        raise ValueError("The query is empty")
    payload = {
        "query": query,
        "numResults": _cap(num_results),
        "type": "auto",
        "contents": {"text": {"maxCharacters": SNIPPET_CHARS * 2}},
    }
    data = await _post(ctx, "/search", payload, HTTP_TIMEOUT_S)
    return {"results": _results(data), "query": query}


@tool(
    display_name="Find similar",
    timeout_s=20,
    cache_ttl_s=600,
    cache_public=True,
    summarize=lambda result: f"{plural(len(result['results']), 'page')} similar to {url_host(result['url'])}",
    sources=lambda result: _page_sources(result.get("results")),
    status_text=lambda args: f"Finding pages similar to {url_host(args.get('url', ''))}…",
)
async def find_similar(
    ctx: ToolContext,
    url: Annotated[str, "URL of a page; results are pages like it"],
    num_results: Annotated[int, "How many results to return, 1 to 10"] = 5,
) -> dict[str, Any]:
    """Find web pages similar to a given page."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"Not an http(s) URL: {url!r}")
    payload = {
        "url": url,
        "numResults": _cap(num_results),
        "excludeSourceDomain": True,
        "contents": {"text": {"maxCharacters": SNIPPET_CHARS * 2}},
    }
    data = await _post(ctx, "/findSimilar", payload, HTTP_TIMEOUT_S)
    return {"results": _results(data), "url": url}


def _contents_summary(result: dict[str, Any]) -> str:
    read, asked = len(result["results"]), len(result["urls"])
    return f"Read {plural(read, 'page')}" if read == asked else f"Read {read} of {plural(asked, 'page')}"


def _contents_status(args: dict[str, Any]) -> str:
    urls = args.get("urls")
    if not isinstance(urls, list):
        urls = []
    return f"Reading {url_host(urls[0])}…" if len(urls) == 1 else f"Reading {plural(len(urls), 'page')}…"


@tool(
    display_name="Get contents",
    timeout_s=30,
    cache_ttl_s=300,
    cache_public=True,
    summarize=_contents_summary,
    sources=lambda result: _page_sources(result.get("results")),
    status_text=_contents_status,
)
async def get_contents(
    ctx: ToolContext,
    urls: Annotated[list[str], f"URLs of the pages to read, at most {MAX_URLS}"],
) -> dict[str, Any]:
    """Read the text of web pages."""
    urls = [url.strip() for url in urls if url.strip()][:MAX_URLS]
    if not urls:
        raise ValueError("No URLs given")
    bad = [url for url in urls if not url.startswith(("http://", "https://"))]
    if bad:
        raise ValueError(f"Not an http(s) URL: {bad[0]!r}")
    data = await _post(
        ctx, "/contents", {"urls": urls, "text": {"maxCharacters": CONTENTS_CHARS}}, CONTENTS_HTTP_TIMEOUT_S
    )
    failed = [
        {"url": str(status.get("id", "")), "error": str((status.get("error") or {}).get("tag") or "unavailable")}
        for status in data.get("statuses") or []
        if isinstance(status, dict) and status.get("status") == "error"
    ]
    return {"results": _results(data, CONTENTS_CHARS), "urls": urls, "failed": failed}


def _answer_citations(data: dict[str, Any]) -> list[dict[str, str]]:
    citations = []
    for item in data.get("citations") or []:
        if isinstance(item, dict) and item.get("url"):
            url = str(item["url"])
            citations.append({"title": _clip(item.get("title"), 300) or url, "url": url})
    return citations


@tool(
    display_name="Answer",
    timeout_s=45,
    summarize=lambda result: f"Answer with {plural(len(result['citations']), 'citation')}",
    sources=lambda result: _page_sources(result.get("citations")),
    status_text=lambda args: f"Looking up an answer to “{args.get('query', '')}”…",
)
async def answer(
    ctx: ToolContext,
    query: Annotated[str, "The question to answer from web sources"],
) -> dict[str, Any]:
    """Answer a question from web search results, with citations."""
    if not query.strip():
        raise ValueError("The query is empty")
    data = await _post(ctx, "/answer", {"query": query, "text": False}, ANSWER_HTTP_TIMEOUT_S)
    text = data.get("answer")
    if not isinstance(text, str):
        # Exa answers with an object when asked for structured output; this tool never asks.
        raise ToolFailure("Exa returned a malformed response")
    return {"answer": text, "citations": _answer_citations(data)}


toolset = Toolset(
    id="exa",
    name="Exa web search",
    short_name="Exa",
    description="Search the web, find similar pages, read pages and get cited answers with Exa.",
    needs_api_key=True,
    default_settings={"base_url": DEFAULT_BASE_URL},
    tools=[search, find_similar, get_contents, answer],
)
