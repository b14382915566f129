"""A small, deterministic fake of Exa's HTTP API, for tests and for running Tessera offline.

    with FakeExa() as exa:                    # or: base_url, stop = start_fake_exa()
        ...  # point the toolset at exa.base_url, send the key FAKE_API_KEY
        exa.requests[-1].body                 # what the client sent

    python -m toolsets.exa.fake_server --port 8765   # then EXA_BASE_URL=http://127.0.0.1:8765

It serves POST /search, /findSimilar, /contents and /answer with believable pages from a small
built-in corpus (AI news, Django), padded with pages made up from the query. Requests without the
expected `x-api-key` get a 401. Markers anywhere in a request body simulate failures:
"[exa:500]" → 500, "[exa:429]" → 429, "[exa:badjson]" → a 200 that is not JSON, and
"[exa:slow]" → the answer comes after `slow_s` seconds. A URL containing "notfound" cannot be
crawled by /contents.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit

FAKE_API_KEY = "exa-test-key"


@dataclass(frozen=True)
class Page:
    title: str
    url: str
    published: str
    author: str
    text: str
    tags: frozenset[str]


def _page(title: str, url: str, published: str, author: str, text: str, tags: str) -> Page:
    return Page(title, url, published, author, text, frozenset(tags.split()))


_AI = "ai artificial intelligence news llm llms model models machine learning"
PAGES = [
    _page(
        "Open-weight language models close the gap with frontier systems",
        "https://news.example.com/2026/05/open-weight-models-close-gap",
        "2026-05-12",
        "Maya Chen",
        "A new round of benchmark results shows open-weight language models trailing the best closed "
        "systems by only a few points on reasoning and coding tasks. Researchers credit better training "
        "data and longer post-training, while cautioning that benchmarks still miss real-world reliability.",
        f"{_AI} open weight benchmark",
    ),
    _page(
        "EU AI Act: what the first year of enforcement changed for developers",
        "https://techpolicy.example.org/eu-ai-act-first-year",
        "2026-05-10",
        "Jonas Weber",
        "One year into enforcement of the EU AI Act, companies shipping general-purpose models have "
        "published training-data summaries and risk assessments. Smaller developers say the paperwork is "
        "manageable, but ask for clearer guidance on open-source exemptions.",
        f"{_AI} regulation policy eu law",
    ),
    _page(
        "Chipmakers race to meet demand for AI accelerators",
        "https://business.example.com/markets/ai-accelerator-demand",
        "2026-05-08",
        "Priya Raman",
        "Orders for data-center accelerators keep outpacing supply, and chipmakers are expanding "
        "advanced packaging capacity to catch up. Analysts expect prices to stay high through next year "
        "as cloud providers build out new AI regions.",
        f"{_AI} chips hardware gpu business",
    ),
    _page(
        "Researchers report smaller models that reason with fewer tokens",
        "https://science.example.net/ai/efficient-reasoning-models",
        "2026-05-06",
        "Elena Rossi",
        "A university team describes a training method that lets compact models solve multi-step maths "
        "problems with far shorter chains of thought. The approach cuts inference cost by more than half "
        "on their test suite, though gains shrink on open-ended questions.",
        f"{_AI} research reasoning efficiency",
    ),
    _page(
        "Hospitals trial AI assistants for clinical note-taking",
        "https://health.example.com/ai-clinical-notes-trial",
        "2026-05-03",
        "Samuel Okafor",
        "Several hospital networks are piloting ambient AI assistants that draft clinical notes from "
        "doctor-patient conversations. Early results point to less after-hours paperwork, with every "
        "draft still reviewed and signed by a clinician.",
        f"{_AI} health medicine hospitals",
    ),
    _page(
        "Django Channels: WebSockets in Django, explained",
        "https://docs.example.dev/django/channels-websockets",
        "2025-11-20",
        "Ana Lima",
        "Channels extends Django beyond HTTP with consumers that handle WebSockets and other protocols. "
        "A channel layer, usually backed by Redis, lets any process send messages to groups of connected "
        "clients, which is how background workers push live updates to the browser.",
        "django channels websockets websocket asgi redis python",
    ),
    _page(
        "Running Celery workers alongside Django in production",
        "https://blog.example.dev/celery-django-production",
        "2026-01-14",
        "Tom Becker",
        "Celery moves slow work out of the request cycle. In production, run workers as separate "
        "processes, make tasks idempotent, set time limits, and keep task arguments small: pass ids, "
        "not model instances.",
        "django celery workers tasks redis python production",
    ),
    _page(
        "HTMX and Django: server-rendered interactivity without a SPA",
        "https://blog.example.dev/htmx-django-partials",
        "2026-02-02",
        "Ana Lima",
        "HTMX lets Django templates stay the single source of HTML: endpoints return partials that swap "
        "into the page. Rendering the same partial for the first page load and for later updates keeps "
        "the two from drifting apart.",
        "django htmx templates partials python frontend",
    ),
]

_MARKER = re.compile(r"\[exa:[a-z0-9]+\]")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


_STOPWORDS = _words(
    "a an the of about for and or to in on at by with what whats is are was how why when "
    "who latest recent new news today me find show tell give"
)


def _clean(text: str) -> str:
    return " ".join(_MARKER.sub(" ", text).split())


def _rank(query: str, exclude: str = "") -> list[Page]:
    """Pages sharing a word with the query, best first; "news" alone does not match everything."""
    words = _words(query)
    terms = words - _STOPWORDS
    scored = []
    for index, page in enumerate(PAGES):
        if page.url == exclude:
            continue
        score = len(terms & (page.tags | _words(page.title)))
        if score:
            # "news" only breaks ties, so "latest news about AI" prefers AI news.
            scored.append((-score, -len(words & page.tags), index, page))
    return [page for *_, page in sorted(scored, key=lambda row: row[:3])]


def _made_up(topic: str, count: int) -> list[Page]:
    topic = topic or "this topic"
    slug = re.sub(r"[^a-z0-9]+", "-", topic.lower()).strip("-")[:60] or "topic"
    templates = [
        ("{t}: a practical guide", "https://www.example.com/guides/{s}", "Editorial team"),
        ("What to know about {t}", "https://encyclopedia.example.org/wiki/{s}", ""),
        ("{t} explained", "https://blog.example.com/{s}-explained", "Alex Morgan"),
        ("Recent developments in {t}", "https://news.example.com/topics/{s}", "Newsroom"),
        ("Discussion: {t}", "https://forum.example.net/t/{s}", ""),
    ]
    pages = []
    for i in range(count):
        title, url, author = templates[i % len(templates)]
        suffix = f"-{i // len(templates) + 1}" if i >= len(templates) else ""
        pages.append(
            Page(
                title=title.format(t=topic[:1].upper() + topic[1:]),
                url=url.format(s=slug) + suffix,
                published=f"2026-04-{28 - i:02d}",
                author=author,
                text=f"This page gives an overview of {topic}: the main ideas, common questions and where to "
                f"read further. It collects background, recent changes and practical examples.",
                tags=frozenset(),
            )
        )
    return pages


def _path_name(url: str) -> str:
    """`https://x.example.com/blog/some-page.html` → "some page"; the host for a bare domain."""
    parts = urlsplit(url)
    name = parts.path.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return " ".join(re.split(r"[-_]+", name)).strip() or parts.hostname or "the page"


def _result(page: Page, text: Any, score: float) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": page.url,
        "url": page.url,
        "title": page.title,
        "publishedDate": f"{page.published}T00:00:00.000Z",
        "author": page.author or None,
        "score": round(score, 4),
    }
    if text:
        limit = text.get("maxCharacters") if isinstance(text, dict) else None
        item["text"] = page.text[:limit] if isinstance(limit, int) else page.text
    return item


def _num_results(body: dict[str, Any]) -> int:
    value = body.get("numResults", 10)
    return max(1, min(100, value)) if isinstance(value, int) else 10


def _search(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        return 400, {"error": "query is required", "tag": "INVALID_REQUEST_BODY"}
    count = _num_results(body)
    pages = _rank(query)[:count]
    pages += _made_up(_clean(query), count - len(pages))
    text = (body.get("contents") or {}).get("text")
    results = [_result(page, text, 0.9 - i * 0.03) for i, page in enumerate(pages)]
    return 200, {"resolvedSearchType": "neural", "results": results, "costDollars": {"total": 0.005}}


def _find_similar(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    url = body.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return 400, {"error": "url must be an http(s) URL", "tag": "INVALID_REQUEST_BODY"}
    count = _num_results(body)
    source = next((page for page in PAGES if page.url == url), None)
    topic = " ".join(sorted(source.tags)) if source else _path_name(url)
    pages = _rank(topic, exclude=url)[:count]
    pages += _made_up(_path_name(url), count - len(pages))
    text = (body.get("contents") or {}).get("text")
    results = [_result(page, text, 0.88 - i * 0.03) for i, page in enumerate(pages)]
    return 200, {"results": results, "costDollars": {"total": 0.005}}


def _contents(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    urls = body.get("urls") or body.get("ids")
    if not isinstance(urls, list) or not urls:
        return 400, {"error": "urls is required", "tag": "INVALID_REQUEST_BODY"}
    results, statuses = [], []
    for url in urls:
        if "notfound" in str(url):
            statuses.append({"id": url, "status": "error", "error": {"tag": "CRAWL_NOT_FOUND", "httpStatusCode": 404}})
            continue
        page = next((page for page in PAGES if page.url == url), None)
        if page is None:
            name = _path_name(str(url))
            text = _made_up(name, 1)[0].text
            page = Page(name[:1].upper() + name[1:], str(url), "2026-04-20", "", text, frozenset())
        results.append(_result(page, body.get("text", True), 1.0))
        statuses.append({"id": url, "status": "success"})
    return 200, {"results": results, "statuses": statuses, "costDollars": {"total": 0.001 * len(urls)}}


def _answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        return 400, {"error": "query is required", "tag": "INVALID_REQUEST_BODY"}
    pages = _rank(query)[:3]
    pages += _made_up(_clean(query), 3 - len(pages))
    answer = " ".join(page.text.split(". ")[0].rstrip(".") + "." for page in pages)
    citations = [_result(page, body.get("text"), 1.0) for page in pages]
    return 200, {"answer": answer, "citations": citations, "costDollars": {"total": 0.005}}


ROUTES: dict[str, Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]] = {
    "/search": _search,
    "/findSimilar": _find_similar,
    "/contents": _contents,
    "/answer": _answer,
}


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeExa


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            body = None
        path = self.path.split("?", 1)[0]
        fake.requests.append(RecordedRequest(path, {k.lower(): v for k, v in self.headers.items()}, body))

        if path not in ROUTES:
            return self._send(404, {"error": f"Not found: {path}", "tag": "NOT_FOUND"})
        if self.headers.get("x-api-key") != fake.api_key:
            return self._send(401, {"error": "Invalid API key", "tag": "INVALID_API_KEY"})
        if not isinstance(body, dict):
            return self._send(400, {"error": "Body must be a JSON object", "tag": "INVALID_REQUEST_BODY"})
        if "[exa:500]" in raw:
            return self._send(500, {"error": "Internal server error", "tag": "INTERNAL_ERROR"})
        if "[exa:429]" in raw:
            return self._send(429, {"error": "Rate limit exceeded", "tag": "RATE_LIMIT_EXCEEDED"})
        if "[exa:badjson]" in raw:
            return self._send(200, "<html>Bad gateway</html>")
        if "[exa:slow]" in raw and fake.stopping.wait(fake.slow_s):
            return  # shutting down
        status, data = ROUTES[path](body)
        data["requestId"] = hashlib.sha1(raw.encode()).hexdigest()[:32]
        self._send(status, data)

    def _send(self, status: int, data: dict[str, Any] | str) -> None:
        payload = (data if isinstance(data, str) else json.dumps(data)).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if isinstance(data, dict) else "text/html")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client gave up (e.g. its timeout fired during "[exa:slow]")

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.fake.verbose:
            super().log_message(format, *args)


class FakeExa:
    """The fake server, started on a free port of 127.0.0.1 unless told otherwise."""

    def __init__(
        self, api_key: str = FAKE_API_KEY, *, host: str = "127.0.0.1", port: int = 0, slow_s: float = 3.0
    ) -> None:
        self.api_key = api_key
        self.slow_s = slow_s
        self.verbose = False
        self.requests: list[RecordedRequest] = []
        self.stopping = threading.Event()
        self._address = (host, port)
        self._server: _Server | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeExa is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self.stopping.clear()
        self._server = _Server(self._address, _Handler)
        self._server.fake = self
        # A short poll interval makes stop() quick; the default would add half a second per test.
        serve = functools.partial(self._server.serve_forever, poll_interval=0.05)
        threading.Thread(target=serve, name="fake-exa", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self.stopping.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_fake_exa(api_key: str = FAKE_API_KEY, *, port: int = 0) -> tuple[str, Callable[[], None]]:
    """Starts a FakeExa and returns its base URL and a function that stops it."""
    fake = FakeExa(api_key, port=port).start()
    return fake.base_url, fake.stop


def main() -> None:
    parser = argparse.ArgumentParser(description="Run a fake Exa API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--api-key", default=FAKE_API_KEY)
    options = parser.parse_args()
    fake = FakeExa(options.api_key, host=options.host, port=options.port)
    fake.verbose = True
    fake.start()
    print(f"Fake Exa on {fake.base_url} (API key {options.api_key!r}); set EXA_BASE_URL={fake.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
