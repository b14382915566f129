"""Files built byte by byte for the tests: real PDFs, Word documents and images, and hostile
ones (a ZIP bomb posing as a Word document, a PDF claiming a million pages)."""

from __future__ import annotations

import io
import zipfile


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf(pages: list[str], *, kids: list[int] | None = None, count: int | None = None) -> bytes:
    """A PDF with one page per text (Helvetica, one line per line of text)."""
    objects: list[bytes] = []
    n_pages = len(pages)
    # 1 catalog, 2 pages, 3 font, then (page, content) pairs.
    page_ids = [4 + 2 * i for i in range(n_pages)]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kid_refs = " ".join(f"{i} 0 R" for i in (kids if kids is not None else page_ids))
    objects.append(f"<< /Type /Pages /Kids [{kid_refs}] /Count {count if count is not None else n_pages} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for index, text in enumerate(pages):
        lines = text.split("\n")
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        for line in lines:
            ops.append(f"({_pdf_escape(line)}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {page_ids[index] + 1} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return write_pdf(objects)


def million_page_pdf(*, declared: int = 1_000_000) -> bytes:
    """One real page listed a million times in a two-level page tree (a thousand nodes of a
    thousand kids each); `declared` is the count the root claims."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{6 + i} 0 R' for i in range(1000))}] /Count {declared} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 5 0 R >>",
        b"<< /Length 33 >>\nstream\nBT /F1 12 Tf 72 720 Td (Page) Tj ET\nendstream",
    ]
    objects += [f"<< /Type /Pages /Parent 2 0 R /Kids [{' 4 0 R' * 1000}] /Count 1000 >>".encode()] * 1000
    return write_pdf(objects)


def write_pdf(objects: list[bytes]) -> bytes:
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)


def docx_xml(paragraphs: list[str], heading: str = "") -> bytes:
    body = ""
    if heading:
        body += f'<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>{heading}</w:t></w:r></w:p>'
    for text in paragraphs:
        body += f'<w:p><w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>'
    body += "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Cell A</w:t></w:r></w:p></w:tc>"
    body += "<w:tc><w:p><w:r><w:t>Cell B</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
    head = f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W_NS}">'
    return f"{head}<w:body>{body}</w:body></w:document>".encode()


def docx(paragraphs: list[str], heading: str = "", document: bytes | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", CONTENT_TYPES)
        archive.writestr("word/document.xml", document if document is not None else docx_xml(paragraphs, heading))
    return out.getvalue()


def zip_bomb_docx() -> bytes:
    """A Word document whose text part is 40 MB of spaces, a few tens of KB compressed."""
    head = f'<?xml version="1.0"?><w:document xmlns:w="{W_NS}"><w:body><w:p><w:r><w:t>'.encode()
    return docx([], document=head + b" " * (40 * 1024 * 1024) + b"</w:t></w:r></w:p></w:body></w:document>")


def billion_laughs_docx() -> bytes:
    entities = '<!ENTITY a "ha">' + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8)
    )
    document = (
        f'<?xml version="1.0"?><!DOCTYPE w:document [{entities}]>'
        f'<w:document xmlns:w="{W_NS}"><w:body><w:p><w:r><w:t>&i;</w:t></w:r></w:p></w:body></w:document>'
    ).encode()
    return docx([], document=document)


def image(fmt: str = "PNG", size: tuple[int, int] = (64, 48), colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, fmt)
    return out.getvalue()
