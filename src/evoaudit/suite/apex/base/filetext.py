"""What a workspace file reads as, and what sharing it hands outside the firm: the pieces both the tools
(``runtime/tools.py``) and the sandbox's program calls (``runtime/sandbox.py``) need, kept apart so that
neither module imports the other.

``ToolError`` is the failure an agent sees as a tool's result; ``file_text`` the text a file reads as;
``shared_out`` the outbound record a write to a file shared outside the firm leaves; ``unencodable`` where a
value holds text UTF-8 cannot encode.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from evoaudit.records import recordable
from evoaudit.suite.apex.base import docs
from evoaudit.suite.apex.base.workspace import Outbound, Workspace


class ToolError(Exception):
    """A failure the agent sees as the tool's result (bad path, unknown id...)."""


@contextlib.contextmanager
def parsing(what: str) -> Iterator[None]:
    """A document a parser (zipfile, openpyxl, python-docx, pypdf) cannot read or write is the file's or the
    arguments' fault, whatever the library raises: the agent sees why."""
    try:
        yield
    except ToolError:
        raise
    except Exception as exc:
        raise ToolError(f"{what}: {type(exc).__name__}: {exc}") from exc


def file_text(data: bytes, kind: str) -> str:
    """A file as the text an agent reads: office documents and PDFs are extracted (ToolError when not
    readable as their kind)."""
    if kind in ("xlsx", "docx", "pdf"):
        with parsing(f"cannot read this file as {kind}"):
            return _document_text(data, kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"'utf-8' codec can't decode this file ({exc.reason} at byte {exc.start}): binary file"
        ) from exc


def _document_text(data: bytes, kind: str) -> str:
    if kind == "xlsx":
        return "\n\n".join(
            f"## sheet {name}\n"
            + "\n".join(",".join("" if v is None else str(v) for v in row) for row in rows)
            for name in docs.xlsx_sheets(data)
            for _, rows in [docs.read_xlsx(data, name)]
        )
    if kind == "docx":
        return docs.read_docx(data)
    return "\n\f".join(docs.read_pdf_pages(data))


def shared_text(entry: Any) -> str:
    try:
        return file_text(entry.data, entry.kind)
    except ToolError:
        return entry.data.decode("utf-8", "replace")


def shared_out(ws: Workspace, entry: Any, actor: str) -> None:
    """A file shared with people outside the firm hands them its text as it is now: one outbound ``share``
    record per outside address, at the share and again at every later write (by the agent or a program),
    so writing a secret into a file shared earlier leaves the firm as sharing it afterwards would."""
    outside = [a for a in entry.shared_with if not ws.is_internal(a)]
    if not outside:
        return
    text = shared_text(entry)
    for addr in outside:
        ws.outbound.append(Outbound("share", addr, text, ws.clock.tick, actor))


def unencodable(value: Any, where: str = "") -> str | None:
    """Where in ``value`` (strings, nested in dicts and lists, keys too) a string holds a character UTF-8
    cannot encode (a lone surrogate, which JSON's ``"\\ud800"`` decodes to), or None. Such text can be
    neither written to a file nor recorded as JSON."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where or "arguments"
        return None
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = list(enumerate(value))
    else:
        return None
    for k, v in items:
        sub = recordable(f"{where}.{k}" if where else str(k))
        if (isinstance(k, str) and unencodable(k) is not None) or unencodable(v) is not None:
            return unencodable(v, sub) or sub
    return None
