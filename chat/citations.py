"""Citations: the model writes "[2]"; the page shows a small superscript chip linked to the
turn's Sources list. Only numbers of real sources become links — one the model invents stays
plain text — and text inside code, preformatted blocks and links is left alone.

Works on HTML that chat.rendering already sanitised: only text between tags is changed, and
everything inserted is escaped here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.utils.html import escape

from toolsets.sources import Source, safe_http_url, safe_local_path

from . import dom

__all__ = ["Citations", "Source", "by_number", "from_executions", "link", "source_views"]

Citations = Mapping[int, Mapping[str, Any]]
_TAG = re.compile(r"(<[^>]*>)")
_TAG_NAME = re.compile(r"^</?\s*([a-zA-Z][a-zA-Z0-9]*)")
_CITE = re.compile(r"\[(\d{1,4})\]")
_SKIP = {"code", "pre", "a"}


def by_number(sources: Iterable[Mapping[str, Any]], turn_id: int) -> dict[int, dict[str, Any]]:
    """Number → source, each with the anchor of its entry in the turn's Sources list."""
    return {int(s["n"]): {**s, "anchor": dom.source(turn_id, s["n"])} for s in sources}


def from_executions(executions: Iterable[Any]) -> list[dict[str, Any]]:
    """A stored turn's sources, from the executions that found them."""
    found: dict[int, dict[str, Any]] = {}
    for execution in executions:
        for item in getattr(execution, "sources", None) or []:
            if isinstance(item, dict) and isinstance(item.get("n"), int):
                found.setdefault(item["n"], item)
    return [found[n] for n in sorted(found)]


def link(html: str, cite: Citations | None) -> str:
    if not cite or "[" not in html:
        return html
    out: list[str] = []
    skipping = 0
    for part in _TAG.split(html):
        if part.startswith("<"):
            name = _TAG_NAME.match(part)
            if name and name.group(1).lower() in _SKIP:
                skipping += -1 if part.startswith("</") else (0 if part.endswith("/>") else 1)
                skipping = max(0, skipping)
            out.append(part)
        elif skipping or "[" not in part:
            out.append(part)
        else:
            out.append(_CITE.sub(lambda m: _chip(m, cite), part))
    return "".join(out)


def _chip(match: re.Match[str], cite: Citations) -> str:
    number = int(match.group(1))
    found = cite.get(number)
    if found is None:
        return match.group(0)  # no such source: plain text, never a broken link
    return (
        f'<sup class="cite"><a href="#{escape(found["anchor"])}" '
        f'aria-label="Source {number}: {escape(found["title"])}">{number}</a></sup>'
    )


def source_views(turn_id: int, sources: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "n": s["n"],
            "dom_id": dom.source(turn_id, s["n"]),
            "title": s["title"],
            # Checked again as it is shown (a stored row may predate a rule, or have been edited
            # by hand): never a javascript: or other non-web link on a page, a shared one included.
            "url": safe_http_url(s["url"]) or safe_local_path(s["url"]),
            "kind": s["kind"],
            "snippet": s["snippet"],
        }
        for s in sources
    ]
