"""The demo model and attached files: reading the files a message names, searching them, and
"seeing" an image (its size, format and dominant colour, decoded from the image part itself)."""

from __future__ import annotations

import base64
import binascii
import csv
import re
from collections.abc import Mapping
from typing import Any

from .reading import Intent

FILES = "files"
_NOTE = "[Attached files:"
_ATTACHED = re.compile(r"“(?P<name>[^”]*)” \(file_id (?P<id>\d+), (?P<kind>[^,)]+)")
_SEARCH = re.compile(
    r"\b(?:find|show|search|look up|where)\b.*?\b(?:mentions?|mentioned|says?|talks? about|refers? to|for|contains?)"
    r"\s+(?P<query>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_FILE_WORDS = re.compile(
    r"\b(?:files?|documents?|docs?|pdfs?|csvs?|spreadsheets?|reports?|contracts?|attachments?|attached|notes?)\b",
    re.IGNORECASE,
)
_ELSEWHERE = re.compile(r"\b(?:web|internet|online|news|google|exa|site|url|https?)\b", re.IGNORECASE)
_READ = re.compile(r"\b(?:summari[sz]e|what'?s in|what is in|read|describe|tell me about|look at|explain|open)\b", re.I)


def attached(message: str) -> list[tuple[int, str, str]]:
    """(file id, name, kind) of each file the message's note names."""
    _, _, note = message.partition(_NOTE)
    return [(int(m["id"]), m["name"], m["kind"].strip()) for m in _ATTACHED.finditer(note)]


def own_words(message: str) -> str:
    """The message without the note Tessera adds about its files."""
    return message.partition(_NOTE)[0].rstrip()


def intents(message: str) -> list[Intent]:
    """Files tool calls the message asks for; empty when it asks for none."""
    own, _, _ = message.partition(_NOTE)
    own = " ".join(own.split())
    files = attached(message)
    search = _SEARCH.search(own)
    if search and (_FILE_WORDS.search(own) or files) and not _ELSEWHERE.search(own):
        query = re.sub(r"^(?:the|a|an)\s+", "", search["query"].strip(" ?.!\"'“”"), flags=re.IGNORECASE)
        query = re.sub(r"\s+in (?:the|my|this) (?:files?|documents?|contracts?|attachments?)$", "", query, flags=re.I)
        if query:
            return [Intent("search_files", FILES, {"query": query, "scope": "chat" if files else "all"})]
    if _READ.search(own) and _FILE_WORDS.search(own):
        documents = [file_id for file_id, _, kind in files if kind != "image"]
        if documents:
            return [Intent("read_file", FILES, {"file_id": file_id}, n) for n, file_id in enumerate(documents[:3])]
        if not files:
            return [Intent("list_files", FILES, {"scope": "chat"})]
    return []


def describe_images(content: Any) -> str:
    """A sentence per image part of the message: what the demo model "sees"."""
    if not isinstance(content, list):
        return ""
    from core.documents.extract import ExtractError
    from core.documents.images import describe_image, extract_image

    lines = []
    for part in content:
        if not isinstance(part, Mapping) or part.get("type") != "image_url":
            continue
        url = str((part.get("image_url") or {}).get("url", ""))
        head, _, data = url.partition(",")
        try:
            image = extract_image(base64.b64decode(data, validate=True)) if head.endswith(";base64") else None
        except (ExtractError, binascii.Error, ValueError):
            image = None
        lines.append(describe_image(image.facts) if image else "An image I could not decode.")
    if not lines:
        return ""
    if len(lines) == 1:
        return f"Here is what I see in the image: {lines[0][0].lower()}{lines[0][1:]}"
    return "Here is what I see in the images:\n\n" + "\n".join(f"{n}. {line}" for n, line in enumerate(lines, 1))


# --- answers from the tools' results ---------------------------------------------------------


def _mark(data: dict[str, Any], index: int = 0) -> str:
    sources = data.get("sources")
    if isinstance(sources, list) and len(sources) > index and isinstance(sources[index], dict):
        number = sources[index].get("n")
        if isinstance(number, int):
            return f" [{number}]"
    return ""


def _sentences(text: str, count: int) -> str:
    flat = " ".join(text.split())
    found = re.split(r"(?<=[.!?])\s+", flat)
    picked = " ".join(found[:count])
    return picked if len(picked) <= 600 else picked[:599].rstrip() + "…"


def _name(data: dict[str, Any]) -> str:
    return str(data.get("name") or "The file").replace("*", "").replace("[", "(").replace("]", ")")


def _read_block(data: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    if "text" not in data:
        return None
    name = _name(data)
    if "image" in data:
        return f"**{name}**: {data['text']}{_mark(data)}"
    where = ""
    if data.get("pages"):
        first, last = data.get("page") or data.get("first_page"), data.get("page") or data.get("last_page")
        span = f"page {first}" if first == last else f"pages {first}–{last}"
        where = f" ({span} of {data['pages']})"
    if data.get("columns") is not None and data.get("type") == "CSV":
        columns = [str(c).replace("|", "/") for c in data["columns"]]
        lines = [f"**{name}** is a table of {data.get('rows', 0)} rows with {len(columns)} columns{_mark(data)}:", ""]
        lines.append("| " + " | ".join(columns) + " |")
        lines.append("|" + "---|" * len(columns))
        rows = [r for r in str(data["text"]).splitlines()[1:4] if r.strip()]
        for row in rows:
            cells = next(csv.reader([row]), [])
            lines.append("| " + " | ".join(c.replace("|", "/") for c in cells[: len(columns)]) + " |")
        return "\n".join(lines)
    text = str(data["text"]).strip()
    if not text:
        return f"**{name}**{where} has no text I could read."
    more = ""
    if data.get("more"):
        more = f"\n\nThat was the first {data['end'] - data['start']:,} of {data['total_characters']:,} characters."
    return f"**{name}**{where} in short: {_sentences(text, 3)}{_mark(data)}{more}"


def _search_block(data: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    passages = data.get("passages")
    if not isinstance(passages, list):
        return None
    query = str(data.get("query") or arguments.get("query") or "")
    if not passages:
        return f"I found nothing about “{query}” in your files."
    lines = [f"Here is where your files mention “{query}”:", ""]
    for index, hit in enumerate(passages[:5]):
        where = f", page {hit['page']}" if hit.get("page") else ""
        lines.append(f"- **{_name(hit)}**{where}: “{_sentences(str(hit.get('passage', '')), 2)}”{_mark(data, index)}")
    return "\n".join(lines)


def _list_block(data: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    files = data.get("files")
    if not isinstance(files, list):
        return None
    if not files:
        return "There are no files attached here yet: use the paperclip to attach one."
    lines = [f"You have {len(files)} file{'s' if len(files) != 1 else ''}:", ""]
    lines += [f"- **{_name(f)}** ({f.get('type', 'file')}, file {f.get('file_id')})" for f in files[:20]]
    return "\n".join(lines)


RENDERERS = {"read_file": _read_block, "search_files": _search_block, "list_files": _list_block}
