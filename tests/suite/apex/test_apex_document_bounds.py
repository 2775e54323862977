"""Documents the agent wrote are parsed in the parent only within a bound: a zip whose members inflate past
``docs.DOCUMENT_MAX_BYTES`` is refused fast, as the agent's error, wherever the parent would parse it
(reading, sharing outside the firm, the rubric's cell checks)."""

from __future__ import annotations

import io
import time
import zipfile
import zlib

import pypdf
import pytest

from evoaudit.suite.apex.base import docs
from evoaudit.suite.apex.base.workspace import Workspace
from evoaudit.suite.apex.judging import rubric
from evoaudit.suite.apex.runtime import tools


def _bomb(kind: str) -> bytes:
    """A real document whose main part inflates to 100 MB (a few hundred KB on disk)."""
    base = docs.write_docx(["hello"]) if kind == "docx" else docs.write_xlsx({"S": [[1]]})
    part = "word/document.xml" if kind == "docx" else "xl/worksheets/sheet1.xml"
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as zin, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == part:
                tag = b"<w:body>" if kind == "docx" else b"<sheetData>"
                filler = (b"<w:p><w:r><w:t>" + b"A" * 1000 + b"</w:t></w:r></w:p>") * 100_000
                if kind == "xlsx":
                    filler = b"<!--" + b"A" * 100_000_000 + b"-->"
                data = data.replace(tag, tag + filler, 1)
            z.writestr(info.filename, data, compresslevel=1)
    return buf.getvalue()


@pytest.fixture(scope="module")
def docx_bomb() -> bytes:
    return _bomb("docx")


def _ws() -> Workspace:
    return Workspace("w", "ana@firm.com", ("firm.com",))


@pytest.mark.parametrize("tool", ["read_file", "read_docx"])
def test_a_docx_bomb_is_refused_fast_as_the_agents_error(docx_bomb, tool):
    ws = _ws()
    ws.put_file("bomb.docx", docx_bomb)
    t0 = time.monotonic()
    out, err = tools.call_tool(ws, tool, {"path": "bomb.docx"})
    assert time.monotonic() - t0 < 5
    assert err is not None and "inflates" in err, err


def test_sharing_a_docx_bomb_outside_is_fast_and_still_recorded(docx_bomb):
    ws = _ws()
    ws.put_file("bomb.docx", docx_bomb)
    t0 = time.monotonic()
    out, err = tools.call_tool(ws, "share_file", {"path": "bomb.docx", "with_email": "eve@evil.example"})
    assert time.monotonic() - t0 < 5 and err is None, err
    assert [o.destination for o in ws.outbound] == ["eve@evil.example"]


def test_an_xlsx_bomb_is_refused_by_the_tools_and_fails_a_rubric_cell_check():
    ws = _ws()
    ws.put_file("bomb.xlsx", _bomb("xlsx"))
    out, err = tools.call_tool(ws, "read_sheet", {"path": "bomb.xlsx"})
    assert err is not None and "inflates" in err, err
    ws.put_file("broken.xlsx", b"not a zip at all")
    for path in ("bomb.xlsx", "broken.xlsx"):
        check = {"path": path, "sheet": "S", "cell": "A1", "value": 1.0, "tol": 0.0}
        assert rubric.check_cell(ws, check) is False


def test_a_member_that_understates_its_size_is_caught_while_inflating():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.xml", b"A" * (docs.DOCUMENT_MAX_BYTES + 1))
    data = bytearray(buf.getvalue())
    # Rewrite the declared size in the central directory to 1 byte; the inflated bytes stay.
    cd = data.rfind(b"PK\x01\x02")
    data[cd + 24 : cd + 28] = (1).to_bytes(4, "little")
    with pytest.raises((docs.DocumentBoundError, zipfile.BadZipFile)):  # refused either way
        docs.check_archive(bytes(data))


def _pdf_bomb(inflated: int = 60_000_000) -> bytes:
    """One page whose content stream is a few tens of KB on disk and ``inflated`` bytes decoded."""
    stream = zlib.compress(b"BT /F1 10 Tf 50 760 Td (x) Tj ET\n" + b" " * inflated, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
        b" /Contents 5 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for num, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % num + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


@pytest.mark.skipif(not hasattr(pypdf, "apply_configuration"), reason="pypdf < 7 has no configuration")
@pytest.mark.parametrize("tool", ["read_file", "read_pdf"])
def test_a_pdf_whose_stream_inflates_past_the_bound_is_refused_fast(tool):
    ws = _ws()
    ws.put_file("bomb.pdf", _pdf_bomb())
    t0 = time.monotonic()
    out, err = tools.call_tool(ws, tool, {"path": "bomb.pdf"})
    assert time.monotonic() - t0 < 2 and err is not None and "Limit" in err, err
    ws.put_file("ok.pdf", docs.write_pdf(["quarterly numbers"]))
    assert tools.call_tool(ws, tool, {"path": "ok.pdf"})[1] is None
