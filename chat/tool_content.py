"""A tool card's result when the tool returned content blocks (MCP servers do): each block
rendered by its type — text as sanitised markdown, structured content as pretty JSON, images
inline (as data URLs of raster types, already size-capped when stored, shown size-capped by the
stylesheet), audio playable and files downloadable (always as octet-stream), resource links as
links: http(s) as they are, any other scheme through Tessera's preview page of the server that
sent it."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from toolsets.mcp.results import IMAGE_TYPES, for_user, is_content_result

from .rendering import render_block

TEXT_LIMIT = 20_000


def render(result: Any) -> SafeString | None:
    """The HTML of a content result, or None when `result` is not one."""
    if not is_content_result(result):
        return None
    parts: list[str] = []
    structured = "structuredContent" in result and not _echoes_text(result)
    for block in result["content"]:
        # The spec asks a server to send structured content also as JSON text, for older
        # clients: shown once, as the structured content.
        if not for_user(block):
            continue  # meant for the model only (its `audience`)
        if not (structured and _is_json_of(block, result["structuredContent"])):
            parts.append(_block(block))
    if structured:
        text = json.dumps(result["structuredContent"], indent=2, ensure_ascii=False, default=str)
        parts.append(str(format_html('<pre class="tc-code"><code>{}</code></pre>', text[:TEXT_LIMIT])))
    return mark_safe("".join(parts))


def _download(data: str, name: str, mime: str) -> str:
    # Always as octet-stream: a server's file is saved, never opened in Tessera's origin.
    return str(
        format_html(
            '<a class="btn btn-small" download="{}" href="data:application/octet-stream;base64,{}" '
            'data-testid="tool-call-download" title="{}">Download</a>',
            name,
            data,
            mime,
        )
    )


def _file_name(uri: str) -> str:
    parts = urlsplit(uri)
    tail = (parts.netloc + parts.path).rstrip("/").rsplit("/", 1)[-1] if uri else ""
    safe = "".join(ch for ch in tail if ch.isalnum() or ch in "._-")[:100]
    return safe or "file"


def _is_json_of(block: dict[str, Any], structured: Any) -> bool:
    if block["type"] != "text":
        return False
    try:
        return bool(json.loads(str(block.get("text", ""))) == structured)
    except ValueError:
        return False


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
    if kind == "audio" and isinstance(block.get("data"), str):
        # The stored data is base64 only (results._media); the type is one browsers play.
        src = f"data:{block.get('mimeType')};base64,{block['data']}"
        return str(
            format_html(
                '<p class="tc-media"><audio controls preload="metadata" src="{}" data-testid="tool-call-audio">'
                "</audio> {}</p>",
                src,
                _download(block["data"], "audio", str(block.get("mimeType", ""))),
            )
        )
    if kind == "file" and isinstance(block.get("data"), str):
        uri = str(block.get("uri", ""))
        return str(
            format_html(
                '<p class="tc-media">File <code>{}</code> · {} · {} {}</p>',
                uri or "file",
                block.get("mimeType", ""),
                filesizeformat(int(block.get("size") or 0)),
                _download(block["data"], _file_name(uri), str(block.get("mimeType", ""))),
            )
        )
    if kind == "resource_link":
        uri = str(block.get("uri", ""))
        label = block.get("name") or uri
        server = str(block.get("server", ""))
        if urlsplit(uri).scheme in ("http", "https"):
            link = format_html('<a href="{}" target="_blank" rel="noopener noreferrer">{}</a>', uri, label)
        elif server.startswith("mcp_") and uri:
            # Any other scheme (file://, a server's own) is read through the server that linked
            # it, on Tessera's preview page, with the reader's own access.
            page = reverse("toolsets:mcp_resource", args=[server.removeprefix("mcp_")])
            link = format_html(
                '<a href="{}?{}" target="_blank" rel="noopener" data-testid="tool-call-resource-link">{}</a> '
                "<code>{}</code>",
                page,
                urlencode({"uri": uri}),
                label,
                uri,
            )
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
