from __future__ import annotations

import io
import zipfile

import pytest

from core.documents.extract import ExtractError
from knowledge import archives


def _zip(files: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_files_are_unpacked_with_clean_paths_and_junk_left_out() -> None:
    data = _zip({"docs/a.md": b"# A", "../../etc/evil.txt": b"x", "__MACOSX/._a.md": b"junk", ".DS_Store": b"j"})

    found = {entry.path: entry.data for entry in archives.unpack(data, 1024 * 1024)}

    assert found == {"docs/a.md": b"# A", "etc/evil.txt": b"x"}


def test_a_zip_bomb_is_refused() -> None:
    bomb = _zip({"zeros.txt": b"\0" * 50_000_000})

    with pytest.raises(ExtractError, match="zip bomb"):
        list(archives.unpack(bomb, 100 * 1024 * 1024))


def test_too_many_entries_are_refused() -> None:
    many = _zip({f"{n}.txt": b"x" for n in range(archives.MAX_ENTRIES + 1)}, compression=zipfile.ZIP_STORED)

    with pytest.raises(ExtractError, match="holds 1,001 files"):
        list(archives.unpack(many, 1024))


def test_an_entry_over_the_size_limit_is_refused() -> None:
    with pytest.raises(ExtractError, match="larger than"):
        list(archives.unpack(_zip({"big.txt": b"ab" * 2_000_000}), 1024 * 1024))


def test_a_directory_that_understates_sizes_is_still_bounded() -> None:
    data = bytearray(_zip({"a.txt": b"hello " * 100_000}))
    # Rewrite the central directory's uncompressed size to claim 10 bytes.
    at = data.rfind(b"PK\x01\x02")
    data[at + 24 : at + 28] = (10).to_bytes(4, "little")

    with pytest.raises(ExtractError):
        list(archives.unpack(bytes(data), 64 * 1024))


def test_a_broken_zip_is_a_clear_error() -> None:
    with pytest.raises(ExtractError, match="could not be opened"):
        list(archives.unpack(b"PK\x03\x04garbage", 1024))


def test_a_word_document_is_not_taken_for_an_archive() -> None:
    assert archives.is_zip(_zip({"a.md": b"x"}))
    assert not archives.is_zip(_zip({"word/document.xml": b"<w/>"}))
