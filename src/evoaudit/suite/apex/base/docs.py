"""Office documents and PDFs, written byte-identically and read back as text.

openpyxl and python-docx stamp the save time into ``docProps/core.xml`` and zip entries; ``_normalise_ooxml``
rewrites both to fixed values. PDFs are written by a small text-only writer (Helvetica, one text object per
page) so that no library metadata or timestamps enter them; pypdf reads them back.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Sequence
from typing import Any

FIXED_ZIP_TIME = (2026, 1, 1, 0, 0, 0)
# What an office document (a zip) may inflate to before any parser sees it: a workspace's documents are
# kilobytes, and a 390 KB .docx whose document.xml inflates to 100 MB held python-docx for minutes. Checked
# by inflating each member up to the bound (so a member whose header under-states its size is caught too).
DOCUMENT_MAX_BYTES = 16 << 20
DOCUMENT_MAX_MEMBERS = 2_000


class DocumentBoundError(ValueError):
    """An office document over ``DOCUMENT_MAX_BYTES`` inflated, or with too many members."""


def check_archive(data: bytes, max_bytes: int = DOCUMENT_MAX_BYTES) -> None:
    """Raise ``DocumentBoundError`` before parsing a zip-based document that inflates past ``max_bytes``
    (all members together) or holds more than ``DOCUMENT_MAX_MEMBERS`` members; time is bounded with it,
    since inflating stops at the bound."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        if len(infos) > DOCUMENT_MAX_MEMBERS:
            raise DocumentBoundError(f"the document has {len(infos)} parts, over {DOCUMENT_MAX_MEMBERS}")
        declared = sum(i.file_size for i in infos)
        if declared > max_bytes:
            raise DocumentBoundError(f"the document inflates to {declared} bytes, over {max_bytes}")
        total = 0
        for info in infos:
            with zf.open(info) as fh:
                while chunk := fh.read(1 << 20):
                    total += len(chunk)
                    if total > max_bytes:
                        raise DocumentBoundError(f"the document inflates past {max_bytes} bytes")


_FIXED_W3CDTF = "2026-01-01T00:00:00Z"


def deterministic_zip(entries: Sequence[tuple[str, bytes]]) -> bytes:
    """A zip whose bytes depend only on the entries (fixed times, permissions and compression level)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=FIXED_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3
            zf.writestr(info, data, compresslevel=6)
    return buf.getvalue()


def _normalise_ooxml(raw: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        entries = [(i.filename, zf.read(i.filename)) for i in zf.infolist()]
    out = []
    for name, data in entries:
        if name == "docProps/core.xml":
            text = data.decode("utf-8")
            text = re.sub(
                r"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:\2>)",
                rf"\g<1>{_FIXED_W3CDTF}\g<3>",
                text,
            )
            data = text.encode("utf-8")
        out.append((name, data))
    return deterministic_zip(out)


# --- xlsx -------------------------------------------------------------------------------------------------


def write_xlsx(sheets: dict[str, list[list[Any]]], author: str = "workspace") -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    wb.remove(wb.active)
    for title, rows in sheets.items():
        ws = wb.create_sheet(title)
        for row in rows:
            ws.append(list(row))
    wb.properties.creator = author
    wb.properties.lastModifiedBy = author
    buf = io.BytesIO()
    wb.save(buf)
    return _normalise_ooxml(buf.getvalue())


def xlsx_sheets(data: bytes) -> list[str]:
    from openpyxl import load_workbook

    check_archive(data)

    return list(load_workbook(io.BytesIO(data), read_only=True).sheetnames)


def read_xlsx(data: bytes, sheet: str | None = None) -> tuple[str, list[list[Any]]]:
    from openpyxl import load_workbook

    check_archive(data)

    wb = load_workbook(io.BytesIO(data), data_only=True, read_only=True)
    name = sheet or wb.sheetnames[0]
    if name not in wb.sheetnames:
        raise KeyError(f"no sheet {name!r}; sheets: {wb.sheetnames}")
    rows = [list(r) for r in wb[name].iter_rows(values_only=True)]
    return name, rows


def xlsx_cell(data: bytes, sheet: str, cell: str) -> Any:
    from openpyxl import load_workbook

    check_archive(data)

    wb = load_workbook(io.BytesIO(data), data_only=True)
    return wb[sheet][cell].value


def write_xlsx_cells(data: bytes | None, sheet: str, cells: dict[str, Any]) -> bytes:
    from openpyxl import Workbook, load_workbook

    if data is None:
        wb = Workbook()
        wb.active.title = sheet
    else:
        check_archive(data)
        wb = load_workbook(io.BytesIO(data))
        if sheet not in wb.sheetnames:
            wb.create_sheet(sheet)
    ws = wb[sheet]
    for ref, value in cells.items():
        ws[ref] = value
    buf = io.BytesIO()
    wb.save(buf)
    return _normalise_ooxml(buf.getvalue())


# --- docx -------------------------------------------------------------------------------------------------


def write_docx(paragraphs: Sequence[str], title: str | None = None, author: str = "workspace") -> bytes:
    from docx import Document

    doc = Document()
    if title:
        doc.add_heading(title, level=1)
    for para in paragraphs:
        doc.add_paragraph(para)
    doc.core_properties.author = author
    doc.core_properties.last_modified_by = author
    doc.core_properties.revision = 1
    buf = io.BytesIO()
    doc.save(buf)
    return _normalise_ooxml(buf.getvalue())


def read_docx(data: bytes) -> str:
    from docx import Document

    check_archive(data)

    doc = Document(io.BytesIO(data))
    return "\n".join(p.text for p in doc.paragraphs)


# --- pdf --------------------------------------------------------------------------------------------------

_LINES_PER_PAGE = 48


def _pdf_escape(text: str) -> str:
    text = text.encode("latin-1", "replace").decode("latin-1")
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(lines: Sequence[str]) -> bytes:
    """A PDF 1.4 of text lines, 48 a page, in Helvetica 10 pt; no metadata, no timestamps."""
    pages = [list(lines[i : i + _LINES_PER_PAGE]) for i in range(0, max(len(lines), 1), _LINES_PER_PAGE)]
    objects: list[bytes] = []
    n_pages = len(pages)
    # 1 catalog, 2 pages tree, 3 font, then (page, content) pairs.
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, page in enumerate(pages):
        body = ["BT", "/F1 10 Tf", "12 TL", "50 760 Td"]
        for line in page:
            body.append(f"({_pdf_escape(line)}) Tj T*")
        body.append("ET")
        stream = "\n".join(body).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for num, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % num + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


# A PDF's streams, inflated, in total: parsing their content is slower per byte than a zip's XML.
PDF_MAX_DECODED_BYTES = 4 << 20


def read_pdf_pages(data: bytes) -> list[str]:
    """Each page's text. Where pypdf has its configuration (7.x), every stream inflates to at most
    ``PDF_MAX_DECODED_BYTES`` and all of them together to twice that, so a small file whose streams inflate
    to gigabytes is refused (pypdf's LimitReachedError) instead of holding the parent; older versions keep
    their own, larger, per-stream limits."""
    import pypdf
    from pypdf import PdfReader

    apply = getattr(pypdf, "apply_configuration", None)
    if apply is None:  # pypdf < 7
        return [page.extract_text() or "" for page in PdfReader(io.BytesIO(data)).pages]
    cap = PDF_MAX_DECODED_BYTES
    with apply(
        zlib_maximum_output_length=cap,
        lzw_maximum_output_length=cap,
        run_length_maximum_output_length=cap,
        array_based_stream_maximum_output_length=cap,
        stream_decoding_work_maximum_length=2 * cap,
    ):
        return [page.extract_text() or "" for page in PdfReader(io.BytesIO(data)).pages]
