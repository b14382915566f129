"""Web: fetch a page and return its readable text. Every hop is checked by `safety`."""

from __future__ import annotations

import asyncio
import codecs
import re
import ssl
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Annotated, Any
from urllib.parse import urljoin

import httpcore
import httpx

from toolsets.base import ToolContext, ToolFailure, Toolset, tool, url_host
from toolsets.sources import source

from .safety import AddressCheck, Destination, PinnedTransport, Resolver, check_destination, default_check
from .safety import system_resolver as default_resolver

MAX_BYTES = 2 * 1024 * 1024
MAX_CHARS = 20_000
MAX_REDIRECTS = 5
# Below the tool's timeout, so a slow page ends with this message rather than the executor's.
DEADLINE_S = 18.0
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
HEADERS = {
    "User-Agent": "Mozilla/5.0 (compatible; Tessera web fetch)",
    "Accept": "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.1",
}
REDIRECT_CODES = {301, 302, 303, 307, 308}
HTML_TYPES = {"text/html", "application/xhtml+xml"}
TEXT_TYPES = {"text/plain", "text/markdown", "text/x-markdown", "application/json"}


Progress = Callable[[str, float | None], None]


async def fetch(
    url: str,
    *,
    resolver: Resolver = default_resolver,
    check: AddressCheck = default_check,
    network_backend: httpcore.AsyncNetworkBackend | None = None,
    ssl_context: ssl.SSLContext | None = None,
    max_bytes: int = MAX_BYTES,
    max_chars: int = MAX_CHARS,
    max_redirects: int = MAX_REDIRECTS,
    deadline_s: float = DEADLINE_S,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Fetches `url`, following up to `max_redirects` redirects, each hop checked again.

    `resolver` and `check` decide where a hop may go (defaults: the system resolver, public
    addresses only); `network_backend` opens the TCP connections to the checked addresses
    (default: real sockets). Tests replace them; production never does."""
    try:
        async with asyncio.timeout(deadline_s):
            target = url
            for _ in range(max_redirects + 1):
                destination = await check_destination(target, resolver=resolver, check=check)
                result = await _get(destination, network_backend, ssl_context, max_bytes, max_chars, progress)
                if isinstance(result, dict):
                    return result
                target = result
    except TimeoutError:
        raise ToolFailure(
            f"Fetching {url} took longer than {deadline_s:g} seconds.", error_type="timeout_error", retryable=True
        ) from None
    raise ToolFailure(f"Too many redirects (more than {max_redirects}) fetching {url}.")


async def _get(
    destination: Destination,
    network_backend: httpcore.AsyncNetworkBackend | None,
    ssl_context: ssl.SSLContext | None,
    max_bytes: int,
    max_chars: int,
    progress: Progress | None = None,
) -> dict[str, Any] | str:
    """One hop: the page, or the URL a redirect points to."""
    transport = PinnedTransport(destination, ssl_context=ssl_context, network_backend=network_backend)
    host = destination.url.host
    try:
        async with (
            httpx.AsyncClient(transport=transport, timeout=TIMEOUT, follow_redirects=False, trust_env=False) as client,
            client.stream("GET", destination.url, headers=HEADERS) as response,
        ):
            if response.status_code in REDIRECT_CODES:
                location: str | None = response.headers.get("location")
                if not location:
                    raise ToolFailure(f"{host} answered {response.status_code} without saying where to go.")
                return urljoin(str(destination.url), location)
            _raise_for_status(response, host)
            media_type, charset = _content_type(response.headers.get("content-type", ""))
            if media_type not in HTML_TYPES | TEXT_TYPES and not media_type.endswith("+json"):
                raise ToolFailure(
                    f"Unsupported content type {media_type or '(none)'}: only HTML, plain text, Markdown "
                    "and JSON can be read."
                )
            body, truncated = await _read_capped(response, max_bytes, progress)
    except httpx.TimeoutException as exc:
        raise ToolFailure(
            f"{host} did not answer in time ({type(exc).__name__}).", error_type="timeout_error", retryable=True
        ) from None
    except httpx.TransportError as exc:
        if _caused_by(exc, ssl.SSLCertVerificationError):
            raise ToolFailure(f"The TLS certificate of {host} could not be verified: {exc}") from None
        raise ToolFailure(f"Could not fetch from {host}: {exc or type(exc).__name__}", retryable=True) from None
    except httpx.DecodingError as exc:
        raise ToolFailure(f"{host} sent a body that could not be decoded: {exc}") from None

    if media_type in HTML_TYPES:
        page = ReadableHTML.parse(_decode(body, charset or _meta_charset(body)))
        title, text = page.title, page.text
    else:
        text = _decode(body, charset)
        title = _markdown_title(text) if "markdown" in media_type else ""
    if len(text) > max_chars:
        text, truncated = text[:max_chars], True
    return {
        "url": str(destination.url),
        "title": title,
        "text": text,
        "content_type": media_type,
        "truncated": truncated,
    }


def _raise_for_status(response: httpx.Response, host: str) -> None:
    code = response.status_code
    if code < 300:
        return
    message = f"{host} answered HTTP {code} {response.reason_phrase}".rstrip() + "."
    if code == 429:
        raise ToolFailure(message, error_type="rate_limit_error", retryable=True)
    raise ToolFailure(message, retryable=code >= 500)


async def _read_capped(
    response: httpx.Response, max_bytes: int, progress: Progress | None = None
) -> tuple[bytes, bool]:
    # Decoded bytes are counted, so a small compressed body cannot expand past the cap either.
    body = bytearray()
    try:
        expected = int(response.headers.get("content-length", "")) or None
    except ValueError:
        expected = None
    host = response.request.url.host
    async for chunk in response.aiter_bytes():
        body += chunk
        if progress is not None:
            # The card shows how the download goes; content-length is only a hint (compression).
            kb = len(body) // 1024
            percent = min(99.0, 100 * len(body) / expected) if expected else None
            progress(f"Reading {host}… {kb} KB", percent)
        if len(body) > max_bytes:
            del body[max_bytes:]
            return bytes(body), True  # leaving the stream closes the connection mid-body
    return bytes(body), False


def _content_type(header: str) -> tuple[str, str]:
    media_type, _, params = header.partition(";")
    match = re.search(r"charset\s*=\s*[\"']?([\w.:-]+)", params, re.IGNORECASE)
    return media_type.strip().lower(), match.group(1) if match else ""


def _meta_charset(body: bytes) -> str:
    match = re.search(rb"<meta[^>]+charset\s*=\s*[\"']?([\w.:-]+)", body[:4096], re.IGNORECASE)
    return match.group(1).decode("ascii") if match else ""


def _decode(body: bytes, charset: str) -> str:
    try:
        codec = codecs.lookup(charset or "utf-8").name
    except LookupError:
        codec = "utf-8"
    if codec == "utf-8":
        codec = "utf-8-sig"  # drops a byte order mark
    return body.decode(codec, errors="replace")


def _markdown_title(text: str) -> str:
    match = re.search(r"^# +(.+)$", text[:5000], re.MULTILINE)
    return match.group(1).strip() if match else ""


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# --- Readable text -----------------------------------------------------------------------------

# Content of these is never text a reader sees, or is page chrome rather than the page.
SKIPPED = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas", "nav", "footer"}
    | {"aside", "button", "select", "textarea", "dialog"}
)
PARAGRAPHS = frozenset(
    {"p", "ul", "ol", "dl", "table", "blockquote", "pre", "section", "article", "main", "header", "figure", "hr"}
    | {"address", "details", "fieldset", "h1", "h2", "h3", "h4", "h5", "h6"}
)
LINES = frozenset({"br", "li", "dt", "dd", "tr", "div", "figcaption", "summary", "caption", "option"})
CELLS = frozenset({"td", "th"})
_WHITESPACE = re.compile(r"\s+")


class ReadableHTML(HTMLParser):
    """The title and the visible text of an HTML page: headings as `# …`, list items as `- …`,
    a blank line between paragraphs, whitespace collapsed outside `<pre>`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self._title: list[str] | None = None
        self._first_heading = ""
        self._heading: list[str] | None = None
        self._skipping: list[str] = []
        self._pre = 0
        self._parts: list[str] = []
        self._breaks = 0
        self._prefix = ""

    @classmethod
    def parse(cls, html: str) -> ReadableHTML:
        parser = cls()
        parser.feed(html)
        parser.close()
        if not parser.title:
            parser.title = parser._first_heading
        return parser

    @property
    def text(self) -> str:
        # Not strip(): a page may open with indented <pre> text.
        return re.sub(r"[ \t]+\n", "\n", "".join(self._parts)).lstrip("\n").rstrip()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED:
            self._skipping.append(tag)
        if self._skipping:
            return
        if tag == "title" and not self.title:
            self._title = []
        elif tag in PARAGRAPHS:
            self._break(2)
            if tag == "pre":
                self._pre += 1
            elif tag[0] == "h" and tag[1:].isdigit():
                self._prefix = "#" * int(tag[1:]) + " "
                if not self._first_heading:
                    self._heading = []
        elif tag in LINES:
            self._break(1)
            if tag == "li":
                self._prefix = "- "
        elif tag in CELLS:
            self._space()

    def handle_endtag(self, tag: str) -> None:
        if tag in self._skipping:
            while self._skipping.pop() != tag:
                pass
            return
        if self._skipping:
            return
        if tag == "title" and self._title is not None:
            self.title = _WHITESPACE.sub(" ", "".join(self._title)).strip()
            self._title = None
        elif tag in PARAGRAPHS:
            if tag == "pre":
                self._pre = max(0, self._pre - 1)
            elif self._heading is not None and tag[0] == "h":
                self._first_heading = _WHITESPACE.sub(" ", "".join(self._heading)).strip()
                self._heading = None
            self._break(2)
        elif tag in LINES:
            self._break(1)

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._title is not None:
            self._title.append(data)
            return
        if self._heading is not None:
            self._heading.append(data)
        text = data if self._pre else _WHITESPACE.sub(" ", data)
        if not self._pre and self._at_line_start():
            text = text.lstrip()
        if not text:
            return
        if self._breaks and self._parts:
            self._parts.append("\n" * self._breaks)
        self._breaks = 0
        if self._prefix:
            self._parts.append(self._prefix)
            self._prefix = ""
        self._parts.append(text)

    def _at_line_start(self) -> bool:
        return bool(self._breaks) or not self._parts or self._parts[-1].endswith((" ", "\n"))

    def _break(self, lines: int) -> None:
        self._breaks = max(self._breaks, lines)

    def _space(self) -> None:
        if self._parts and not self._at_line_start():
            self._parts.append(" ")


# --- The tool ----------------------------------------------------------------------------------


def _summary(result: Any) -> str:
    size = len(result["text"].encode()) / 1024
    label = f"“{result['title']}”" if result["title"] else url_host(result["url"])
    text = f"{label} · {size:.1f} KB" if size < 10 else f"{label} · {size:.0f} KB"
    return text + (" (truncated)" if result["truncated"] else "")


@tool(
    display_name="Fetch page",
    timeout_s=20,
    side_effects=False,
    # Pages change: a fetch is reused for 5 minutes. Only public addresses are fetched, so
    # the result is the same for every user.
    cache_ttl_s=300,
    cache_public=True,
    summarize=_summary,
    status_text=lambda args: f"Fetching {url_host(str(args.get('url', '')))}…",
    sources=lambda result: [source(result.get("title"), url=result.get("url"), snippet=result.get("text"))],
)
async def fetch_page(
    ctx: ToolContext,
    url: Annotated[str, "Absolute http or https URL of the page, e.g. https://example.com/article"],
) -> dict[str, Any]:
    """Fetch a public web page and return its title and readable text."""
    return await fetch(url, progress=ctx.progress)


toolset = Toolset(
    id="web",
    name="Web",
    description="Read public web pages: HTML as plain text, or plain text, Markdown and JSON as sent.",
    tools=[fetch_page],
)
