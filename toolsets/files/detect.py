"""What an upload is, decided from its bytes (magic numbers via `filetype`), not its name.

Run at upload, on the first bytes and (for ZIP containers) the archive's directory: cheap enough
for the request path, and a file of a type Tessera cannot read is refused before it is stored.
Inside the text family the exact kind (CSV, JSON, HTML, Markdown, plain) is settled by the worker
once it has the whole text (`extract.text_kind`).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from typing import IO

import filetype

HEAD_BYTES = 8192
IMAGE_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
MAX_ZIP_ENTRIES = 5000
SUPPORTED = "text, Markdown, CSV, JSON, HTML, PDF, Word (.docx) and PNG, JPEG, GIF or WebP images"


class Refused(ValueError):
    """The upload cannot be attached; the message says why, for the person."""


@dataclass(frozen=True)
class Detected:
    family: str  # "text", "pdf", "docx" or "image"
    content_type: str


def detect(head: bytes, stream: IO[bytes] | None = None) -> Detected:
    """`head` is the file's first bytes (up to HEAD_BYTES); `stream` the whole file, read only to
    look inside a ZIP container."""
    if not head:
        raise Refused("The file is empty.")
    if head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return Detected("text", "text/plain")  # a byte-order mark: text, whatever follows
    kind = filetype.guess(head)
    if kind is None:
        if b"\x00" in head:
            raise Refused(f"This file's type is not recognised. Tessera reads {SUPPORTED}.")
        return Detected("text", "text/plain")
    mime = kind.mime
    if mime == "application/pdf":
        return Detected("pdf", mime)
    if mime in IMAGE_TYPES:
        return Detected("image", mime)
    if mime in (DOCX_TYPE, "application/zip") and stream is not None and _is_docx(stream):
        return Detected("docx", DOCX_TYPE)
    label = kind.extension.upper() if kind.extension else mime
    raise Refused(f"{label} files are not supported. Tessera reads {SUPPORTED}.")


def _is_docx(stream: IO[bytes]) -> bool:
    try:
        stream.seek(0)
        with zipfile.ZipFile(stream) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_ZIP_ENTRIES:
                raise Refused(f"This archive holds {len(infos):,} entries; a Word document has far fewer.")
            return any(info.filename == "word/document.xml" for info in infos)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        if isinstance(exc, Refused):
            raise
        return False
    finally:
        stream.seek(0)
