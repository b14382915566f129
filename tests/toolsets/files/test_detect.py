from __future__ import annotations

import io

import pytest

from toolsets.files.detect import DOCX_TYPE, Refused, detect

from . import samples


def _detect(data: bytes) -> tuple[str, str]:
    found = detect(data[:8192], io.BytesIO(data))
    return found.family, found.content_type


def test_types_come_from_content_not_the_name() -> None:
    assert _detect(samples.pdf(["x"])) == ("pdf", "application/pdf")
    assert _detect(samples.image("PNG")) == ("image", "image/png")
    assert _detect(samples.image("JPEG")) == ("image", "image/jpeg")
    assert _detect(samples.image("GIF")) == ("image", "image/gif")
    assert _detect(samples.image("WEBP")) == ("image", "image/webp")
    assert _detect(samples.docx(["Hello"])) == ("docx", DOCX_TYPE)
    assert _detect(b"a,b\n1,2\n") == ("text", "text/plain")
    assert _detect("\ufeffhé".encode()) == ("text", "text/plain")
    assert _detect("hello".encode("utf-16")) == ("text", "text/plain")


def test_empty_file_is_refused() -> None:
    with pytest.raises(Refused, match="empty"):
        detect(b"")


@pytest.mark.parametrize(
    "data",
    [
        b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff" + b"\x00" * 64,  # a Windows program
        b"\x7fELF\x02\x01\x01" + b"\x00" * 64,
        b"PK\x03\x04",  # a ZIP that is not a Word document
        b"\x00\x01\x02\x03binary",
    ],
)
def test_unreadable_types_are_refused(data: bytes) -> None:
    with pytest.raises(Refused, match="Tessera reads"):
        _detect(data)


def test_a_zip_with_other_content_is_not_a_word_document() -> None:
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(Refused, match="not supported"):
        _detect(out.getvalue())


def test_bmp_images_are_refused_with_the_supported_list() -> None:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (4, 4)).save(out, "BMP")
    with pytest.raises(Refused, match="PNG, JPEG, GIF or WebP"):
        _detect(out.getvalue())
