from __future__ import annotations

import json

import pytest

from core.documents.extract import ExtractError, Limits, extract, html_to_text, text_kind

from . import samples


def test_plain_text_and_markdown() -> None:
    assert extract(b"Just a note.\nSecond line.", "text").kind == "text"
    md = extract(b"# Title\n\n- one\n- two\n", "text", "notes.txt")
    assert md.kind == "markdown" and md.text.startswith("# Title")
    assert text_kind("plain words", "readme.md") == "markdown"


def test_csv_reports_columns_rows_and_a_preview() -> None:
    result = extract(b"name;amount\nAda;3\nBob;4\n", "text", "x.txt")
    assert result.kind == "csv"
    assert result.facts["columns"] == ["name", "amount"]
    assert result.facts["rows"] == 2
    assert result.facts["preview"][0] == ["Ada", "3"]


def test_prose_with_commas_is_not_csv() -> None:
    text = "Hello, world. This is prose, with commas.\nAnother line here.\n"
    assert extract(text.encode(), "text").kind == "text"


def test_json_is_pretty_printed_with_its_keys() -> None:
    result = extract(b'{"b": [1, 2], "a": {"c": null}}', "text", "data.bin")
    assert result.kind == "json"
    assert result.facts["keys"] == ["b", "a"]
    assert json.loads(result.text) == {"b": [1, 2], "a": {"c": None}}


def test_deeply_nested_json_falls_back_to_text() -> None:
    result = extract(b"[" * 100_000, "text")
    assert result.kind == "text"


def test_html_becomes_readable_text_without_scripts() -> None:
    html = (
        b"<!doctype html><html><head><title>Report</title><script>alert(1)</script>"
        b"<style>p{}</style></head><body><h1>Q3</h1><p>Revenue <b>grew</b>.</p>"
        b"<ul><li>one</li><li>two</li></ul></body></html>"
    )
    result = extract(html, "text", "page.txt")
    assert result.kind == "html"
    assert "alert" not in result.text and "p{}" not in result.text
    assert result.text.startswith("Report")
    assert "# Q3" in result.text and "Revenue grew." in result.text and "- one" in result.text


def test_broken_html_still_gives_text() -> None:
    assert "text" in html_to_text("<html><body><p>text<div><<</>")


def test_invalid_utf8_is_a_clear_error() -> None:
    with pytest.raises(ExtractError, match=r"not valid UTF-8 text .*0xff at position 6"):
        extract(b"hello \xff world", "text")


def test_utf16_with_bom_is_read() -> None:
    assert extract("héllo".encode("utf-16"), "text").text == "héllo"


def test_nul_characters_are_dropped() -> None:
    assert extract(b"a\x00b", "text").text == "ab"


def test_empty_file_is_an_error() -> None:
    with pytest.raises(ExtractError, match="empty"):
        extract(b"", "text")


def test_long_text_is_cut_at_the_limit_and_says_so() -> None:
    result = extract(b"x" * 5000, "text", limits=Limits(max_chars=1000))
    assert len(result.text) == 1000 and result.facts["truncated"]


def test_pdf_text_by_page() -> None:
    result = extract(samples.pdf(["First page", "Second page\nwith termination"]), "pdf")
    assert result.kind == "pdf"
    assert result.facts["pages"] == 2
    assert result.text[result.page_starts[1] :].startswith("Second page")
    assert "termination" in result.text


def test_pdf_with_a_million_pages_is_refused_before_walking_them() -> None:
    with pytest.raises(ExtractError, match="1,000,000 pages; Tessera reads at most 2,000"):
        extract(samples.million_page_pdf(), "pdf", limits=Limits(max_pages=2000))


def test_broken_pdf_is_a_clear_error() -> None:
    with pytest.raises(ExtractError, match="This PDF could not be read"):
        extract(b"%PDF-1.4\n garbage", "pdf")


def test_docx_paragraphs_headings_and_tables() -> None:
    result = extract(samples.docx(["The term is one year.", "Termination needs notice."], heading="Contract"), "docx")
    assert result.kind == "docx"
    assert result.text.splitlines() == [
        "# Contract",
        "The term is one year.",
        "Termination needs notice.",
        "Cell A | Cell B",
    ]


def test_zip_bomb_posing_as_docx_is_refused() -> None:
    with pytest.raises(ExtractError, match="ZIP bomb"):
        extract(samples.zip_bomb_docx(), "docx")


def test_docx_with_entity_expansion_is_refused() -> None:
    with pytest.raises(ExtractError, match="DTD"):
        extract(samples.billion_laughs_docx(), "docx")


def test_docx_without_its_text_part_is_an_error() -> None:
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("word/other.xml", "<x/>")
    with pytest.raises(ExtractError, match="could not be opened"):
        extract(out.getvalue(), "docx")


def test_image_facts_thumbnail_and_description() -> None:
    result = extract(samples.image("PNG", (640, 480), (30, 60, 210)), "image")
    assert result.facts["width"] == 640 and result.facts["height"] == 480
    assert result.facts["format"] == "PNG"
    assert result.facts["colour_name"] == "blue"
    assert result.text == f"A 640×480 PNG image; its dominant colour is blue ({result.facts['colour']})."
    assert result.thumbnail is not None and result.thumbnail[:4] == b"RIFF"


def test_truncated_image_is_a_clear_error() -> None:
    with pytest.raises(ExtractError, match="could not be read"):
        extract(samples.image("PNG", (300, 300))[:120], "image")


def test_image_with_too_many_pixels_is_refused() -> None:
    import struct
    import zlib

    # A PNG header claiming 100 000 × 100 000 pixels.
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0))
    with pytest.raises(ExtractError, match="60 megapixels"):
        extract(png + chunk(b"IEND", b""), "image")
