"""Where an attack's text goes, and the exact bytes: created artifacts, existing-file baselines, app messages.

API:
- ``render(kind, lines, title)``: a new txt/md/docx/xlsx/pdf artifact's bytes and the text a tool shows;
- ``inject_existing(data, kind, injected, where, keyword)``: the paper's baselines, the injected text at the
  beginning of a file the agent reads or next to its keyword-matched section;
- ``mail_message`` / ``chat_message`` / ``calendar_event``: app content as ``Placed`` records;
- ``apply_static(ws, instance)``: a copy of the world with the instance's static placement applied (payload
  files and messages, and the instruction file). Pure and deterministic; the watcher's dynamic part is applied
  during the episode by the tool layer, not here.

``Placed.target`` is ``file:<path>``, ``mail:<msg_id>``, ``chat:<channel_id>:<msg_id>`` or
``calendar:<uid>``; for app content ``Placed.data`` is the record's fields as canonical JSON.
"""

from __future__ import annotations

import json
from typing import Any

from evoaudit.suite.apex.base import docs
from evoaudit.suite.apex.base.filetext import file_text
from evoaudit.suite.apex.base.threat import AttackInstance, Placed
from evoaudit.suite.apex.base.workspace import CalendarEvent, ChatMessage, Email, Workspace, kind_of

# Whoever plants content owns it: a colleague's account (the threat model's workspace write access).
_TICK_BEFORE = -30  # app messages arrive shortly before the episode starts


def shown_text(data: bytes, kind: str) -> str:
    return file_text(data, kind)


def render(kind: str, lines: list[str], title: str = "") -> tuple[bytes, str]:
    """A new document of ``kind`` holding ``lines`` (with ``title`` as its heading)."""
    if kind in ("txt", "md"):
        head = ([f"# {title}", ""] if kind == "md" else [title, ""]) if title else []
        data = ("\n".join(head + lines) + "\n").encode()
    elif kind == "docx":
        data = docs.write_docx(lines, title or None)
    elif kind == "xlsx":
        rows: list[list[Any]] = [[title or "Notes"]] + [[ln] for ln in lines]
        data = docs.write_xlsx({"Notes": rows})
    elif kind == "pdf":
        data = docs.write_pdf(([title, ""] if title else []) + _wrap(lines))
    else:
        raise ValueError(f"not a document vector: {kind!r}")
    return data, shown_text(data, kind)


def _wrap(lines: list[str], width: int = 95) -> list[str]:
    # The PDF writer draws one text line per input line, with no wrapping of its own.
    out: list[str] = []
    for ln in lines:
        words, cur = ln.split(" "), ""
        for w in words:
            if cur and len(cur) + 1 + len(w) > width:
                out.append(cur)
                cur = w
            else:
                cur = f"{cur} {w}" if cur else w
        out.append(cur)
    return out


def _insert_at(lines: list[str], injected: list[str], where: str, keyword: str) -> list[str]:
    if where == "existing_start":
        return injected + lines
    low = keyword.lower()
    hit = next((i for i, ln in enumerate(lines) if low and low in ln.lower()), None)
    i = 0 if hit is None else hit + 1  # no matching section: the beginning, as a fallback
    return lines[:i] + injected + lines[i:]


def inject_existing(data: bytes, kind: str, injected: list[str], where: str, keyword: str) -> bytes:
    """``data`` with ``injected`` placed per ``where`` ('existing_start' or 'existing_keyword')."""
    if kind in ("txt", "md", "csv", "json", "py"):
        lines = data.decode("utf-8").split("\n")
        return "\n".join(_insert_at(lines, injected, where, keyword)).encode()
    if kind == "docx":
        paras = docs.read_docx(data).split("\n")
        return docs.write_docx(_insert_at(paras, injected, where, keyword))
    if kind == "pdf":
        lines = [ln for page in docs.read_pdf_pages(data) for ln in page.split("\n")]
        return docs.write_pdf(_insert_at(lines, _wrap(injected), where, keyword))
    if kind == "xlsx":
        sheets = {name: [list(r) for r in docs.read_xlsx(data, name)[1]] for name in docs.xlsx_sheets(data)}
        first = next(iter(sheets))
        rows = sheets[first]
        texts = [" ".join("" if v is None else str(v) for v in r) for r in rows]
        at = _insert_at(list(range(len(rows))), [-1] * len(injected), "existing_start", "")
        if where == "existing_keyword":
            hit = next((i for i, t in enumerate(texts) if keyword and keyword.lower() in t.lower()), None)
            k = 0 if hit is None else hit + 1
            at = list(range(k)) + [-1] * len(injected) + list(range(k, len(rows)))
        new, inj = [], iter(injected)
        for i in at:
            new.append([next(inj)] if i < 0 else rows[i])
        sheets[first] = new
        return docs.write_xlsx(sheets)
    raise ValueError(f"cannot inject into a {kind} file")


def _placed_record(target: str, record: dict[str, Any], text: str) -> Placed:
    return Placed.of(target, json.dumps(record, sort_keys=True).encode(), text)


def mail_message(msg_id: str, sender: str, to: str, subject: str, body: str) -> Placed:
    rec = {"msg_id": msg_id, "sender": sender, "to": [to], "subject": subject, "body": body}
    return _placed_record(f"mail:{msg_id}", rec | {"tick": _TICK_BEFORE}, body)


def chat_message(channel_id: str, msg_id: str, sender: str, text: str) -> Placed:
    rec = {"msg_id": msg_id, "sender": sender, "text": text}
    return _placed_record(f"chat:{channel_id}:{msg_id}", rec | {"tick": _TICK_BEFORE}, text)


def calendar_event(
    uid: str, title: str, start: str, end: str, organizer: str, attendees: list[str], text: str
):
    rec = {
        "uid": uid,
        "title": title,
        "start": start,
        "end": end,
        "organizer": organizer,
        "attendees": attendees,
        "description": text,
    }
    return _placed_record(f"calendar:{uid}", rec, text)


def apply_placed(ws: Workspace, p: Placed, owner: str | None = None) -> None:
    """Put one ``Placed`` into ``ws`` (in place). App messages are marked as the world's (actor 'world')."""
    kind, _, rest = p.target.partition(":")
    if kind == "file":
        ws.put_file(rest, p.data, owner=owner)
        return
    rec = json.loads(p.data)
    if kind == "mail":
        ws.mail.append(
            Email(rec["msg_id"], rec["sender"], tuple(rec["to"]), rec["subject"], rec["body"], rec["tick"])
        )
        ws.mail.sort(key=lambda m: (m.tick, m.msg_id))
    elif kind == "chat":
        channel_id = rest.split(":", 1)[0]
        if channel_id not in ws.chat:
            raise ValueError(f"placement {p.target}: world {ws.world_id} has no channel {channel_id}")
        msgs = ws.chat[channel_id].messages
        msgs.append(ChatMessage(rec["msg_id"], rec["sender"], rec["text"], rec["tick"]))
        msgs.sort(key=lambda m: (m.tick, m.msg_id))
    elif kind == "calendar":
        ws.calendar.append(
            CalendarEvent(
                rec["uid"],
                rec["title"],
                rec["start"],
                rec["end"],
                rec["organizer"],
                tuple(rec["attendees"]),
                rec["description"],
            )
        )
    else:
        raise ValueError(f"unknown placement target {p.target!r}")


def apply_static(ws: Workspace, inst: AttackInstance) -> Workspace:
    """A copy of ``ws`` with the instance's payload and instruction file in place (the world at tick 0)."""
    out = ws.copy()
    owner = inst.notes.get("planted_by")
    for p in (*inst.payload, *((inst.instruction_file,) if inst.instruction_file else ())):
        apply_placed(out, p, owner)
    return out


def is_document(path: str) -> bool:
    return kind_of(path) in ("txt", "md", "docx", "xlsx", "pdf")
