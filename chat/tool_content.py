"""A tool card's result when the tool returned content blocks (MCP servers do): each block
rendered by its type — text as sanitised markdown, structured content as pretty JSON, images
inline (as data URLs of raster types, already size-capped when stored, shown size-capped by the
stylesheet), resource links as links (http(s) only; anything else is shown as text)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from toolsets.mcp.results import IMAGE_TYPES, is_content_result

from .rendering import render_block

TEXT_LIMIT = 20_000


def render(result: Any) -> SafeString | None:
    """The HTML of a content result, or None when `result` is not one."""
    if not is_content_result(result):
        return None
    parts: list[str] = []
    for block in result["content"]:
        parts.append(_block(block))
    if "structuredContent" in result and not _echoes_text(result):
        text = json.dumps(result["structuredContent"], indent=2, ensure_ascii=False, default=str)
        parts.append(str(format_html('<pre class="tc-code"><code>{}</code></pre>', text[:TEXT_LIMIT])))
    return mark_safe("".join(parts))


def _block(block: dict[str, Any]) -> str:
    kind = block["type"]
    if kind == "text":
        return f'<div class="tc-text">{render_block(str(block.get("text", ""))[:TEXT_LIMIT])}</div>'
    if kind == "image" and block.get("mimeType") in IMAGE_TYPES and isinstance(block.get("data"), str):
        data = "".join(ch for ch in block["data"] if ch.isalnum() or ch in "+/=")
        return str(
            format_html(
                '<img class="tc-image" alt="Image from the tool" src="data:{};base64,{}">', block["mimeType"], data
            )
        )
    if kind == "resource_link":
        uri = str(block.get("uri", ""))
        label = block.get("name") or uri
        if urlsplit(uri).scheme in ("http", "https"):
            link = format_html('<a href="{}" target="_blank" rel="noopener noreferrer">{}</a>', uri, label)
        else:
            link = format_html("<code>{}</code>", uri)
        description = block.get("description") or ""
        return str(format_html('<p class="tc-link">🔗 {}{}</p>', link, f" — {description}" if description else ""))
    if kind == "resource":
        return str(
            format_html(
                '<div class="tc-resource"><div class="tc-label">{}</div>'
                '<pre class="tc-code"><code>{}</code></pre></div>',
                block.get("uri", ""),
                str(block.get("text", ""))[:TEXT_LIMIT],
            )
        )
    return str(format_html('<p class="tc-note">{}</p>', block.get("text", "")))


def _echoes_text(result: dict[str, Any]) -> bool:
    # SDK servers wrap a plain return value as {"result": value} next to the same text: showing
    # both would repeat it.
    structured = result["structuredContent"]
    texts = {str(b.get("text", "")) for b in result["content"] if b["type"] == "text"}
    return isinstance(structured, dict) and set(structured) == {"result"} and str(structured["result"]) in texts
