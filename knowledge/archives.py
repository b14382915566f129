"""Unpacking a zip of documents, bounded: a hostile archive (a zip bomb, a million entries, a
directory that lies about sizes, paths with `..`) ends with a clear error, never a full disk or
a stuck base. Plain Python; nothing is written under an entry's own name.

Only the directory's declared sizes are checked before reading, and they may lie: every entry is
read with a cap as well, so what is held in memory never passes the limits whatever it says.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

from core.documents.extract import ExtractError

MAX_ENTRIES = 1000
MAX_TOTAL_BYTES = 200 * 1024 * 1024
# Documents compress 2-20 times; a run of zeros a thousand.
MAX_RATIO = 100
SKIPPED_PREFIXES = ("__MACOSX/",)


@dataclass(frozen=True)
class Entry:
    path: str
    data: bytes


def is_zip(data: bytes) -> bool:
    return data[:4] == b"PK\x03\x04" and not _is_office(data)


def _is_office(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist()[:MAX_ENTRIES])
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False
    return "word/document.xml" in names  # a Word document is a zip too: read as one document


def _clean_path(name: str) -> str:
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return posixpath.join(*parts)[:500] if parts else ""


def _wanted(path: str) -> bool:
    base = posixpath.basename(path)
    return bool(base) and not base.startswith(".") and not path.startswith(SKIPPED_PREFIXES)


def unpack(data: bytes, max_entry_bytes: int, max_total_bytes: int = MAX_TOTAL_BYTES) -> Iterator[Entry]:
    """The archive's files, in its order. Raises ExtractError, with a sentence for the person,
    on the first sign of a hostile or broken archive."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ExtractError(f"This zip file could not be opened ({exc}).") from exc
    files = [info for info in infos if not info.is_dir() and _wanted(_clean_path(info.filename))]
    if len(files) > MAX_ENTRIES:
        raise ExtractError(f"This zip file holds {len(files):,} files; a knowledge base takes at most {MAX_ENTRIES:,}.")
    if sum(info.file_size for info in files) > max_total_bytes:
        raise ExtractError(f"This zip file unpacks to more than {max_total_bytes // 2**20} MB.")
    total = 0
    with archive:
        for info in files:
            path = _clean_path(info.filename)
            if info.file_size > max_entry_bytes:
                raise ExtractError(f"“{path}” in this zip file is larger than {max_entry_bytes // 2**20} MB.")
            _check_ratio(path, info.file_size, info.compress_size)
            try:
                with archive.open(info) as stream:
                    content = stream.read(max_entry_bytes + 1)
            except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError) as exc:
                raise ExtractError(f"“{path}” in this zip file could not be unpacked ({exc}).") from exc
            if len(content) > max_entry_bytes:
                raise ExtractError(f"“{path}” in this zip file is larger than {max_entry_bytes // 2**20} MB.")
            _check_ratio(path, len(content), info.compress_size)
            total += len(content)
            if total > max_total_bytes:
                raise ExtractError(f"This zip file unpacks to more than {max_total_bytes // 2**20} MB.")
            if content:
                yield Entry(path, content)


def _check_ratio(path: str, size: int, compressed: int) -> None:
    if size > MAX_RATIO * max(compressed, 1) + 65536:
        raise ExtractError(f"“{path}” unpacks to far more than its size (a zip bomb?); it was not opened.")
