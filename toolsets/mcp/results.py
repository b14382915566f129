"""A tool result from an MCP server, kept as its content blocks.

The stored result is `{"content": [blocks], "structuredContent": …}` (the protocol's own shape,
bounded): text, images (base64, only raster types and only up to MAX_IMAGE_BYTES), resource
links, embedded text resources; anything else is kept as a note. The card renders the blocks by
type (chat.tool_content); the model reads `model_text`, never the image data.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_TEXT = 100_000
MAX_BLOCKS = 50
MAX_IMAGE_BYTES = 1_000_000
# Audio and files travel inline as base64 (in the stored result and every push of the card):
# bounded like images, a little larger.
MAX_MEDIA_BYTES = 2_000_000
AUDIO_TYPES = {"audio/mpeg", "audio/mp3", "audio/wav", "audio/x-wav", "audio/wave", "audio/ogg", "audio/webm"}
MAX_STRUCTURED = 100_000
IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}


def shape(raw: dict[str, Any], server: str = "") -> dict[str, Any]:
    """The stored form of a CallToolResult dumped to JSON (camelCase keys). `server` (the
    toolset id) goes with resource links, which the card opens through that server."""
    blocks: list[dict[str, Any]] = []
    content: list[Any] = raw["content"] if isinstance(raw.get("content"), list) else []
    for block in content:
        if len(blocks) >= MAX_BLOCKS:
            blocks.append({"type": "note", "text": f"{len(content) - MAX_BLOCKS} more content items were left out."})
            break
        if isinstance(block, dict):
            shaped = _block(block)
            if shaped["type"] == "resource_link" and server:
                shaped["server"] = server
            audience = _audience(block)
            if audience:
                shaped["audience"] = audience
            blocks.append(shaped)
    result: dict[str, Any] = {"content": blocks}
    structured = raw.get("structuredContent")
    if structured is not None:
        text = json.dumps(structured, ensure_ascii=False, default=str)
        result["structuredContent"] = (
            structured if len(text) <= MAX_STRUCTURED else {"truncated": text[:MAX_STRUCTURED]}
        )
    return result


def _audience(block: dict[str, Any]) -> str:
    """ "user" or "assistant" when the block is meant for that one only (its `audience`
    annotation); "" when for both, or not said."""
    annotations = block.get("annotations")
    audience = annotations.get("audience") if isinstance(annotations, dict) else None
    if isinstance(audience, list) and len(set(audience)) == 1 and audience[0] in ("user", "assistant"):
        return str(audience[0])
    return ""


def for_user(block: dict[str, Any]) -> bool:
    return block.get("audience") != "assistant"


def for_model(block: dict[str, Any]) -> bool:
    return block.get("audience") != "user"


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    text = value if isinstance(value, str) else ""
    return text if len(text) <= limit else text[:limit] + f"\n[… {len(text) - limit} more characters]"


def _block(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": _text(block.get("text"))}
    if kind == "image":
        mime = str(block.get("mimeType") or "")[:100]
        data: str = block["data"] if isinstance(block.get("data"), str) else ""
        size = len(data) * 3 // 4
        if mime not in IMAGE_TYPES:
            return {"type": "note", "text": f"An image of type {mime or 'unknown'} (not shown)."}
        if size > MAX_IMAGE_BYTES:
            return {"type": "note", "text": f"An image of {size // 1024} kB (too large to show)."}
        return {"type": "image", "mimeType": mime, "data": data}
    if kind == "resource_link":
        return {
            "type": "resource_link",
            "uri": _text(block.get("uri"), 2000),
            "name": _text(block.get("title") or block.get("name"), 300),
            "description": _text(block.get("description"), 1000),
            "mimeType": _text(block.get("mimeType"), 100),
        }
    if kind == "resource":
        resource: dict[str, Any] = block["resource"] if isinstance(block.get("resource"), dict) else {}
        uri = _text(resource.get("uri"), 2000)
        if isinstance(resource.get("text"), str):
            return {
                "type": "resource",
                "uri": uri,
                "mimeType": _text(resource.get("mimeType"), 100),
                "text": _text(resource["text"]),
            }
        return _media("file", resource.get("blob"), _text(resource.get("mimeType"), 100), uri)
    if kind == "audio":
        return _media("audio", block.get("data"), str(block.get("mimeType") or "")[:100], "")
    return {"type": "note", "text": f"Content of type {str(kind)[:50]!r} (not shown)."}


def _media(kind: str, data: Any, mime: str, uri: str) -> dict[str, Any]:
    """Audio (played on the card when of a type browsers play, else offered as a file) or an
    embedded binary resource (a file to download), kept when small enough."""
    encoded = "".join(ch for ch in data if ch.isalnum() or ch in "+/=") if isinstance(data, str) else ""
    size = len(encoded) * 3 // 4 - encoded[-2:].count("=")
    what = "An audio clip" if kind == "audio" else f"The file {uri}" if uri else "A file"
    if not encoded:
        return {"type": "note", "text": f"{what} without data."}
    if size > MAX_MEDIA_BYTES:
        return {"type": "note", "text": f"{what} of {size // 1024} kB (too large to keep)."}
    if kind == "audio" and mime in AUDIO_TYPES:
        return {"type": "audio", "mimeType": mime, "data": encoded}
    if kind == "file" and mime in IMAGE_TYPES and size <= MAX_IMAGE_BYTES:
        return {"type": "image", "mimeType": mime, "data": encoded}
    return {"type": "file", "uri": uri, "mimeType": mime or "application/octet-stream", "data": encoded, "size": size}


def is_content_result(result: Any) -> bool:
    return (
        isinstance(result, dict)
        and isinstance(result.get("content"), list)
        and set(result) <= {"content", "structuredContent"}
        and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in result["content"])
    )


def model_text(result: Any) -> str:
    """What the model reads: the text blocks, a line per other block, and the structured content
    when there is no text (servers are asked to send both, not all do)."""
    if not is_content_result(result):
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    parts: list[str] = []
    for block in result["content"]:
        kind = block["type"]
        if not for_model(block):
            continue  # meant for the user only (its `audience`): the card shows it
        if kind in ("text", "note"):
            parts.append(str(block.get("text", "")))
        elif kind == "image":
            parts.append(f"[An image ({block.get('mimeType')}) was shown to the user.]")
        elif kind == "audio":
            parts.append(f"[An audio clip ({block.get('mimeType')}) was given to the user to play.]")
        elif kind == "file":
            parts.append(f"[A file {block.get('uri') or ''} ({block.get('mimeType')}) was given to the user.]")
        elif kind == "resource_link":
            parts.append(f"[Link: {block.get('name') or block.get('uri')} <{block.get('uri')}>]")
        elif kind == "resource":
            parts.append(f"[Resource {block.get('uri')}]\n{block.get('text', '')}")
    if "structuredContent" in result and not any(b["type"] == "text" and for_model(b) for b in result["content"]):
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False, default=str))
    return "\n".join(parts) or "(The tool returned no content.)"


def summary(result: Any) -> str:
    if not is_content_result(result):
        return "Done"
    for block in result["content"]:
        if block["type"] == "text" and for_user(block) and str(block.get("text", "")).strip():
            return _plain_line(str(block["text"]).strip().splitlines()[0])
    kinds = [block["type"] for block in result["content"]]
    if "audio" in kinds:
        return "An audio clip"
    if "file" in kinds:
        return "A file"
    if "image" in kinds:
        return "An image" if kinds.count("image") == 1 else f"{kinds.count('image')} images"
    if "resource_link" in kinds:
        return f"{kinds.count('resource_link')} link{'s' if kinds.count('resource_link') != 1 else ''}"
    if "structuredContent" in result:
        return "Structured result"
    return "No content"


MAX_SUMMARY_LINE = 500
_MARKS = re.compile(r"(\*\*|\*|`+|~~)(?=\S)(.+?)(?<=\S)\1")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def _plain_line(line: str) -> str:
    """A text result's first line for the card's header: the Markdown it is rendered with in the
    card's body would show as stray asterisks here."""
    # The patterns below take time growing with the square of a line with many unclosed marks:
    # only what a header can show is looked at.
    line = line[:MAX_SUMMARY_LINE]
    line = re.sub(r"^\s*(?:#{1,6}\s+|[-*+]\s+|>\s*)", "", line)
    line = _LINK.sub(r"\1", line)
    for _ in range(3):  # nested emphasis: ***x***, **`x`**
        line = _MARKS.sub(r"\2", line)
    return line.strip() or "Done"
