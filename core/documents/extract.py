"""Reading text and facts out of an attached file. Plain Python with no Django: the worker runs
it in a child process (`sandbox.py`) with a time and memory limit, so a hostile file costs at
most that child.

`extract(data, family, name, limits)` returns an `Extracted` or raises `ExtractError` with a
sentence for the person.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import zipfile
from html.parser import HTMLParser
from typing import Any

from .base import Extracted, ExtractError, Limits, reason
from .images import extract_image

MAX_DOCX_XML_BYTES = 64 * 1024 * 1024
MAX_ZIP_RATIO = 100  # a Word document's XML compresses 5-20 times; zeros compress a thousand
CSV_PREVIEW_ROWS = 5


def extract(data: bytes, family: str, name: str = "", limits: Limits | None = None) -> Extracted:
    limits = limits or Limits()
    if not data:
        raise ExtractError("The file is empty.")
    if family == "pdf":
        result = extract_pdf(data, limits)
    elif family == "docx":
        result = extract_docx(data, limits)
    elif family == "image":
        result = extract_image(data)
    elif family == "text":
        result = extract_text(data, name, limits)
    else:
        raise ExtractError(f"Tessera cannot read files of type {family!r}.")
    result.text = result.text.replace("\x00", "")  # no database stores NUL in text
    return result


def _cut(text: str, limits: Limits, facts: dict[str, Any]) -> str:
    if len(text) > limits.max_chars:
        facts["truncated"] = True
        return text[: limits.max_chars]
    return text


# --- text family ------------------------------------------------------------------------------


def decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ExtractError(f"The file is not valid UTF-16 text (a bad byte at position {exc.start:,}).") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExtractError(
            f"The file is not valid UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start:,} is not "
            "UTF-8). Save it as UTF-8 and attach it again."
        ) from exc


_HTML_START = re.compile(r"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>]|head[\s>]|body[\s>])", re.I | re.S)
_MD_MARKS = re.compile(r"^(?:#{1,6}\s+\S|```|\s*[-*+]\s+\S|\s*\d+\.\s+\S|>\s)|\]\([^)\s]+\)|\*\*\S", re.M)
_DELIMITERS = ",;\t|"


def text_kind(text: str, name: str = "") -> str:
    """CSV, JSON, HTML, Markdown or plain text, from the text itself; the name's extension only
    breaks a tie between Markdown and plain text, which read the same."""
    head = text[:4096]
    if _HTML_START.match(head):
        return "html"
    stripped = text.strip()
    if stripped[:1] in "{[" and _json_value(stripped) is not None:
        return "json"
    if name.lower().endswith((".md", ".markdown")):
        return "markdown"
    if _csv_dialect(text) is not None:
        return "csv"
    if len(_MD_MARKS.findall(head)) >= 2:
        return "markdown"
    return "text"


def _json_value(text: str) -> Any:
    try:
        value = json.loads(text, parse_constant=lambda c: None)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def _csv_dialect(text: str) -> str | None:
    """The delimiter when every one of the first lines has the same number (two or more) of
    fields by it, over at least two lines; else None."""
    lines = [line for line in text[:65536].splitlines()[:50] if line.strip()]
    if len(lines) < 2:
        return None
    for delimiter in _DELIMITERS:
        try:
            counts = {len(row) for row in csv.reader(lines, delimiter=delimiter)}
        except csv.Error:
            continue
        if len(counts) == 1 and counts.pop() >= 2:
            return delimiter
    return None


def extract_text(data: bytes, name: str, limits: Limits) -> Extracted:
    text = decode(data)
    kind = text_kind(text, name)
    facts: dict[str, Any] = {}
    if kind == "html":
        text = html_to_text(text)
    elif kind == "json":
        value = _json_value(text.strip())
        facts["json_type"] = "object" if isinstance(value, dict) else "array"
        facts["items"] = len(value) if value is not None else 0
        if isinstance(value, dict):
            facts["keys"] = [str(key)[:80] for key in list(value)[:20]]
        text = json.dumps(value, indent=2, ensure_ascii=False)
    elif kind == "csv":
        facts.update(_csv_facts(text))
    text = _cut(text, limits, facts)
    facts["chars"] = len(text)
    return Extracted(kind, text, [0], facts)


def _csv_facts(text: str) -> dict[str, Any]:
    delimiter = _csv_dialect(text) or ","
    rows = 0
    header: list[str] = []
    preview: list[list[str]] = []
    try:
        for index, row in enumerate(csv.reader(io.StringIO(text), delimiter=delimiter)):
            if not any(cell.strip() for cell in row):
                continue
            if index == 0:
                header = [cell.strip()[:80] for cell in row[:50]]
                continue
            rows += 1
            if len(preview) < CSV_PREVIEW_ROWS:
                preview.append([cell.strip()[:80] for cell in row[:50]])
    except csv.Error:
        pass  # a malformed line ends the count; the text itself is still there to read
    return {"delimiter": delimiter, "columns": header, "rows": rows, "preview": preview}


class _Readable(HTMLParser):
    SKIP = {"script", "style", "noscript", "template", "svg", "head", "iframe", "object"}
    BLOCK = {
        "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header", "footer",
        "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "hr", "dd", "dt", "main", "nav",
    }  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in self.SKIP:
            self.skipping += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")
        if tag in ("h1", "h2", "h3") and not self.skipping:
            self.parts.append("#" * int(tag[1]) + " ")
        elif tag == "li" and not self.skipping:
            self.parts.append("- ")
        elif tag in ("td", "th") and not self.skipping:
            self.parts.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in self.SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self.skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _Readable()
    try:
        parser.feed(html)
        parser.close()
    except (AssertionError, ValueError):  # html.parser gives up on some broken markup
        pass
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join(parser.title.split())
    return f"{title}\n\n{body}" if title and not body.startswith(title) else body


# --- PDF --------------------------------------------------------------------------------------


def extract_pdf(data: bytes, limits: Limits) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError, PyPdfError

    too_many = "This PDF has {:,} pages; Tessera reads at most {:,}."
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractError("This PDF is protected by a password; attach an unprotected copy.")
        # The count the page tree declares, before walking it (walking a million pages is the
        # attack); a tree that understates it is still bounded by the sandbox's limits.
        pages_node: Any = reader.root_object.get("/Pages")
        declared = pages_node.get_object().get("/Count", 0) if pages_node is not None else 0
        if isinstance(declared, int) and declared > limits.max_pages:
            raise ExtractError(too_many.format(declared, limits.max_pages))
        count = len(reader.pages)
    except ExtractError:
        raise
    except LimitReachedError as exc:
        raise ExtractError(f"This PDF is built beyond what Tessera reads ({reason(exc)}).") from exc
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as exc:
        raise ExtractError(f"This PDF could not be read ({reason(exc)}).") from exc
    if count > limits.max_pages:
        raise ExtractError(too_many.format(count, limits.max_pages))
    parts: list[str] = []
    starts: list[int] = []
    facts: dict[str, Any] = {"pages": count}
    length = 0
    for index in range(count):
        try:
            page_text = reader.pages[index].extract_text() or ""
        except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
            page_text = ""
            facts.setdefault("unreadable_pages", []).append(index + 1)
        page_text = page_text.strip()
        starts.append(length)
        parts.append(page_text)
        length += len(page_text) + 2
        if length > limits.max_chars:
            facts["truncated"] = True
            break
    text = _cut("\n\n".join(parts), limits, facts)
    if not text.strip():
        facts["no_text"] = True
    facts["chars"] = len(text)
    title = _pdf_title(reader)
    if title:
        facts["title"] = title
    return Extracted("pdf", text, starts or [0], facts)


def _pdf_title(reader: Any) -> str:
    try:
        meta = reader.metadata
        title = str(meta.title or "") if meta else ""
    except Exception:  # metadata is optional and often broken
        return ""
    return " ".join(title.split())[:200]


# --- DOCX -------------------------------------------------------------------------------------

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def extract_docx(data: bytes, limits: Limits) -> Extracted:
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        info = archive.getinfo("word/document.xml")
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise ExtractError(f"This Word document could not be opened ({reason(exc)}).") from exc
    if info.file_size > MAX_DOCX_XML_BYTES or info.file_size > MAX_ZIP_RATIO * max(info.compress_size, 1) + 65536:
        raise ExtractError(
            "This Word document unpacks to far more than its size (a ZIP bomb?); Tessera will not open it."
        )
    try:
        with archive.open(info) as stream:
            # The directory's sizes can lie: never read more than the limit, whatever it says.
            xml = stream.read(MAX_DOCX_XML_BYTES + 1)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise ExtractError(f"This Word document could not be unpacked ({reason(exc)}).") from exc
    if len(xml) > MAX_DOCX_XML_BYTES or len(xml) > MAX_ZIP_RATIO * max(info.compress_size, 1) + 65536:
        raise ExtractError(
            "This Word document unpacks to far more than its size (a ZIP bomb?); Tessera will not open it."
        )
    try:
        root = fromstring(xml, forbid_dtd=True)
    except DefusedXmlException as exc:
        raise ExtractError(
            "This Word document declares its own entities (a DTD), which Tessera refuses to expand."
        ) from exc
    except (SyntaxError, ValueError) as exc:
        raise ExtractError(f"This Word document's text could not be read ({reason(exc)}).") from exc
    body = root.find(f"{W}body")
    lines: list[str] = []
    for block in list(body) if body is not None else []:
        if block.tag == f"{W}p":
            lines.append(_docx_paragraph(block))
        elif block.tag == f"{W}tbl":
            for row in block.iter(f"{W}tr"):
                cells = [" ".join(_docx_paragraph(p) for p in cell.iter(f"{W}p")) for cell in row.iter(f"{W}tc")]
                lines.append(" | ".join(cell.strip() for cell in cells))
    facts: dict[str, Any] = {}
    text = _cut(re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip(), limits, facts)
    facts["chars"] = len(text)
    facts["paragraphs"] = sum(1 for line in lines if line.strip())
    return Extracted("docx", text, [0], facts)


def _docx_paragraph(paragraph: Any) -> str:
    out: list[str] = []
    for node in paragraph.iter():
        if node.tag == f"{W}t" and node.text:
            out.append(node.text)
        elif node.tag == f"{W}tab":
            out.append("\t")
        elif node.tag in (f"{W}br", f"{W}cr"):
            out.append("\n")
    text = "".join(out)
    style = paragraph.find(f"{W}pPr/{W}pStyle")
    level = re.fullmatch(r"Heading([1-6])", style.get(f"{W}val", "")) if style is not None else None
    if level and text.strip():
        return "#" * int(level.group(1)) + " " + text
    return text


# --- the child process ------------------------------------------------------------------------


def main() -> None:
    """`python -m core.documents.extract FAMILY NAME MAX_PAGES MAX_CHARS MEMORY_MB CPU_S`, the
    file's bytes on stdin; prints one JSON object: the result or {"error": …}."""
    import base64
    import resource
    import sys

    family, name, max_pages, max_chars, memory_mb, cpu_s = sys.argv[1:7]
    # Below the host's turns: a worker streaming answers gets the CPU before a file being read.
    os.nice(10)
    memory = int(memory_mb) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_s), int(cpu_s) + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # it reads; it never needs to write a file
    data = sys.stdin.buffer.read()
    try:
        result = extract(data, family, name, Limits(int(max_pages), int(max_chars)))
        out: dict[str, Any] = {
            "kind": result.kind,
            "text": result.text,
            "page_starts": result.page_starts,
            "facts": result.facts,
            "thumbnail": base64.b64encode(result.thumbnail).decode() if result.thumbnail else "",
        }
    except ExtractError as exc:
        out = {"error": str(exc)}
    except MemoryError:
        out = {"error": "Reading this file needed more memory than Tessera allows for one file."}
    except RecursionError:
        out = {"error": "This file is nested too deeply to read."}
    sys.stdout.write(json.dumps(out, ensure_ascii=True))


if __name__ == "__main__":
    main()
