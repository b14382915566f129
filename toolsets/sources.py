"""What a tool's result was drawn from, numbered for citation.

A tool declares how to read sources out of its result (`@tool(sources=...)`): web pages, search
results, Workspace items. The executor hands each new source to the turn's `SourceBook`, which
gives it a number that stays the same for the whole turn — across steps, parallel calls and
subagents — so the model can cite "[2]" and the page can link it to the Sources list.
"""

from __future__ import annotations

import re
import threading
from typing import Any, TypedDict
from urllib.parse import urlsplit

MAX_PER_RESULT = 10
MAX_TITLE = 200
MAX_SNIPPET = 300


class Source(TypedDict):
    n: int
    title: str
    url: str  # an http(s) link, a path on this site (a file's preview), or "" (a Workspace item has none)
    kind: str  # what it is when it has no link: "Task", "Email"…; else the link's domain
    snippet: str


def safe_http_url(value: Any) -> str:
    """The value if it is an http(s) URL with a host, else "": nothing else is ever linked."""
    if not isinstance(value, str) or len(value) > 2000:
        return ""
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return ""
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return ""
    return value.strip()


_LOCAL_PATH = re.compile(r"/(?!/)[A-Za-z0-9/_.~%?=&#-]*")


def safe_local_path(value: Any) -> str:
    """A path on this site (e.g. an attached file's page), or "": no scheme, no host, nothing
    that could become script."""
    if not isinstance(value, str) or len(value) > 500 or not _LOCAL_PATH.fullmatch(value):
        return ""
    return value


def _text(value: Any, limit: int) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def source(title: Any, *, url: Any = "", kind: str = "", snippet: Any = "", key: str = "") -> dict[str, str]:
    """One source as a tool's extractor reports it (numbered later by the book). `key` names it
    when it has no link (e.g. "task:12"), so the same item cited twice keeps one number."""
    link = safe_http_url(url) or safe_local_path(url)
    host = (urlsplit(link).hostname or "").removeprefix("www.") if link else ""
    return {
        "title": _text(title, MAX_TITLE) or host or kind or "Source",
        "url": link,
        "kind": host or _text(kind, 40),
        "snippet": _text(snippet, MAX_SNIPPET),
        "key": link or key or f"{kind}:{_text(title, MAX_TITLE)}",
    }


class SourceBook:
    """The numbered sources of one turn. Safe to share between a turn's parallel calls."""

    def __init__(self) -> None:
        self._by_key: dict[str, Source] = {}
        self._lock = threading.Lock()

    def add(self, found: list[dict[str, str]]) -> list[Source]:
        numbered = []
        with self._lock:
            for item in found[:MAX_PER_RESULT]:
                known = self._by_key.get(item["key"])
                if known is None:
                    known = Source(
                        n=len(self._by_key) + 1,
                        title=item["title"],
                        url=item["url"],
                        kind=item["kind"],
                        snippet=item["snippet"],
                    )
                    self._by_key[item["key"]] = known
                numbered.append(known)
        return numbered

    def all(self) -> list[Source]:
        with self._lock:
            return sorted(self._by_key.values(), key=lambda s: s["n"])
