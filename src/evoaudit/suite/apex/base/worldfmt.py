"""Read and write worlds and tasks in the APEX-Agents format.

A world is a zip with ``filesystem/`` (the files) and ``.apps_data/``: mail as one mbox per mailbox, chat as
Google-Chat-style ``Groups/<id>/{group_info,messages}.json`` and ``Users/<id>/user_info.json``, and the
calendar as iCal. What that format has no place for (people and teams, owners and sharing, planted secrets,
the clock) is kept in ``.apps_data/workspace.json``; a reader of the plain format can ignore it.
A task record is ``task_id, domain, world_id, prompt, expected_output, rubric[{verifier_id, criteria}]``;
its files are laid over the world, and a task file wins at the same path.
"""

from __future__ import annotations

import io
import json
import zipfile
from email import message_from_string
from email.message import EmailMessage
from typing import Any

from pydantic import BaseModel, ConfigDict

from evoaudit.errors import AuditError
from evoaudit.suite.apex.base.docs import deterministic_zip
from evoaudit.suite.apex.base.workspace import (
    EPOCH,
    CalendarEvent,
    ChatChannel,
    ChatMessage,
    Clock,
    Email,
    FileEntry,
    Person,
    Secret,
    Team,
    Workspace,
    norm_path,
)

FS = "filesystem/"
APPS = ".apps_data/"


class WorldFormatError(AuditError, ValueError):
    """A world or task-files archive that cannot be a workspace: a bad entry name, a clash, not a zip."""


def open_archive(raw: bytes, source: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile as exc:
        raise WorldFormatError(
            f"{source}: not a zip archive ({exc}); rebuild it (evoaudit apex build)"
        ) from exc


def archive_files(zf: zipfile.ZipFile, source: str) -> list[tuple[str, str]]:
    """(entry name, workspace path) of every file under ``filesystem/``, after checking every entry's name.

    Archives are only ever read in memory, never extracted; still, an entry whose name is absolute, holds
    '..' or a NUL, has a part over 255 bytes, names a file twice or makes a file a folder too (``a`` and
    ``a/b``) is refused, naming the entry: such a world could not be written to the sandbox's filesystem
    and a file written from it could land outside the workspace."""

    def bad(name: str, why: str) -> WorldFormatError:
        return WorldFormatError(
            f"{source}: zip entry {name[:200]!r}: {why}; fix the archive or rebuild it (evoaudit apex build)"
        )

    out: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for name in zf.namelist():
        # An archive entry is never absolute, not even below filesystem/ (an agent's "/x" means "x").
        if name.startswith("/") or name.startswith(FS + "/"):
            raise bad(name, "the name is absolute")
        try:
            norm_path(name.rstrip("/"))
            if not name.startswith(FS) or name.endswith("/"):
                continue
            key = norm_path(name[len(FS) :])
        except ValueError as exc:
            raise bad(name, str(exc)) from None
        if not key:
            raise bad(name, "a file needs a name")
        if key in seen:
            raise bad(name, f"names the same file as entry {seen[key]!r}")
        seen[key] = name
        out.append((name, key))
    for name, key in out:
        parts = key.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent in seen:
                raise bad(name, f"{parent} is a file (entry {seen[parent]!r}), not a folder")
    return out


class RubricItem(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    verifier_id: str
    criteria: str  # the human-readable criterion, as in APEX-Agents
    check: dict[str, Any]  # the machine-readable form ``judging/rubric.py`` scores


class TaskRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    task_id: str
    domain: str
    world_id: str
    prompt: str
    expected_output: str  # "answer" (final answer text), "xlsx", "docx"
    rubric: tuple[RubricItem, ...]
    keywords: tuple[str, ...] = ()
    difficulty: str = ""
    gold: dict[str, Any] = {}


# --- mail (mboxrd) ----------------------------------------------------------------------------------------


def _stamp(tick: int) -> str:
    from datetime import timedelta

    return (EPOCH + timedelta(minutes=tick)).strftime("%a %b %d %H:%M:%S %Y")


def _mbox(messages: list[Email]) -> bytes:
    out = []
    for m in messages:
        msg = EmailMessage()
        msg["Message-ID"] = f"<{m.msg_id}>"
        msg["From"] = m.sender
        msg["To"] = ", ".join(m.to)
        if m.cc:
            msg["Cc"] = ", ".join(m.cc)
        msg["Subject"] = m.subject
        msg["Date"] = _stamp(m.tick)
        msg["X-Folder"] = m.folder
        msg["X-Tick"] = str(m.tick)
        msg["X-Actor"] = m.actor
        msg.set_content(m.body)
        text = msg.as_string()
        # mboxrd: a body line starting with (>*)From gets one more '>'.
        lines = [(">" + ln) if ln.lstrip(">").startswith("From ") else ln for ln in text.split("\n")]
        out.append(f"From {m.sender} {_stamp(m.tick)}\n" + "\n".join(lines).rstrip("\n") + "\n\n")
    return "".join(out).encode("utf-8")


def _parse_mbox(raw: bytes) -> list[Email]:
    chunks: list[list[str]] = []
    for line in raw.decode("utf-8").split("\n"):
        if line.startswith("From "):
            chunks.append([])
        elif chunks:
            chunks[-1].append(
                line[1:] if line.startswith(">") and line.lstrip(">").startswith("From ") else line
            )
    mails = []
    for lines in chunks:
        msg = message_from_string("\n".join(lines).rstrip("\n") + "\n")
        body = msg.get_payload(decode=True).decode("utf-8")
        split = lambda v: tuple(a.strip() for a in (v or "").split(",") if a.strip())  # noqa: E731
        mails.append(
            Email(
                msg_id=msg["Message-ID"].strip("<>"),
                sender=msg["From"],
                to=split(msg["To"]),
                cc=split(msg["Cc"]),
                subject=msg["Subject"],
                body=body[:-1] if body.endswith("\n") else body,
                tick=int(msg["X-Tick"]),
                folder=msg["X-Folder"],
                actor=msg["X-Actor"],
            )
        )
    return mails


# --- calendar (iCal) --------------------------------------------------------------------------------------


def _ical_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\n", "\\n")


def _ical_unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append("\n" if text[i + 1] in "nN" else text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _fold(line: str) -> str:
    # RFC 5545 folds content lines at 75 octets; we fold at 73 characters; a continuation starts with a space.
    parts = [line[:73]] + [" " + line[i : i + 72] for i in range(73, len(line), 72)]
    return "\r\n".join(parts)


def _ical_time(stamp: str) -> str:
    return stamp.replace("-", "").replace(":", "")


def _from_ical_time(value: str) -> str:
    return f"{value[0:4]}-{value[4:6]}-{value[6:8]}T{value[9:11]}:{value[11:13]}:{value[13:15]}"


def _ics(events: list[CalendarEvent]) -> bytes:
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//evoaudit//apex workspace//EN"]
    for e in events:
        lines += [
            "BEGIN:VEVENT",
            f"UID:{e.uid}",
            f"DTSTART:{_ical_time(e.start)}",
            f"DTEND:{_ical_time(e.end)}",
            f"SUMMARY:{_ical_escape(e.title)}",
            f"DESCRIPTION:{_ical_escape(e.description)}",
            f"LOCATION:{_ical_escape(e.location)}",
            f"ORGANIZER:mailto:{e.organizer}",
            *(f"ATTENDEE:mailto:{a}" for a in e.attendees),
            f"X-ACTOR:{_ical_escape(e.actor)}",
            "END:VEVENT",
        ]
    lines.append("END:VCALENDAR")
    return ("\r\n".join(_fold(ln) for ln in lines) + "\r\n").encode("utf-8")


def _parse_ics(raw: bytes) -> list[CalendarEvent]:
    unfolded: list[str] = []
    for line in raw.decode("utf-8").split("\r\n"):
        if line.startswith(" ") and unfolded:
            unfolded[-1] += line[1:]
        elif line:
            unfolded.append(line)
    events, cur = [], None
    for line in unfolded:
        if line == "BEGIN:VEVENT":
            cur = {"attendees": []}
        elif line == "END:VEVENT":
            events.append(
                CalendarEvent(
                    uid=cur["UID"],
                    title=cur["SUMMARY"],
                    start=_from_ical_time(cur["DTSTART"]),
                    end=_from_ical_time(cur["DTEND"]),
                    organizer=cur["ORGANIZER"],
                    attendees=tuple(cur["attendees"]),
                    description=cur.get("DESCRIPTION", ""),
                    location=cur.get("LOCATION", ""),
                    actor=cur.get("X-ACTOR", "world"),
                )
            )
            cur = None
        elif cur is not None:
            key, _, value = line.partition(":")
            if key == "ATTENDEE":
                cur["attendees"].append(value.removeprefix("mailto:"))
            elif key == "ORGANIZER":
                cur[key] = value.removeprefix("mailto:")
            elif key in {"SUMMARY", "DESCRIPTION", "LOCATION", "X-ACTOR"}:
                cur[key] = _ical_unescape(value)
            else:
                cur[key] = value
    return events


# --- chat (Google Chat takeout style) ---------------------------------------------------------------------


def _dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _chat_entries(ws: Workspace) -> list[tuple[str, bytes]]:
    out = []
    for c in sorted(ws.chat.values(), key=lambda c: c.channel_id):
        base = f"{APPS}chat/Groups/{c.channel_id}/"
        members = [{"email": m, "name": ws.people[m].name if m in ws.people else m} for m in c.members]
        out.append(
            (base + "group_info.json", _dump({"name": c.name, "members": members, "external": c.external}))
        )
        msgs = [
            {
                "message_id": m.msg_id,
                "creator": {
                    "email": m.sender,
                    "name": ws.people[m.sender].name if m.sender in ws.people else m.sender,
                },
                "created_date": ws.clock.stamp(m.tick),
                "tick": m.tick,
                "text": m.text,
                "actor": m.actor,
            }
            for m in c.messages
        ]
        out.append((base + "messages.json", _dump({"messages": msgs})))
    for p in sorted(ws.people.values(), key=lambda p: p.email):
        user_type = "Human" if ws.is_internal(p.email) else "External"
        out.append(
            (
                f"{APPS}chat/Users/{p.email.split('@')[0]}/user_info.json",
                _dump({"user": {"name": p.name, "email": p.email, "user_type": user_type}}),
            )
        )
    return out


# --- whole world ------------------------------------------------------------------------------------------


def world_to_zip(ws: Workspace) -> bytes:
    entries: list[tuple[str, bytes]] = [(FS + p, ws.files[p].data) for p in sorted(ws.files)]
    mailboxes: dict[str, list[Email]] = {}
    for m in ws.mail:
        mailboxes.setdefault(m.folder, []).append(m)
    for folder in sorted(mailboxes):
        entries.append((f"{APPS}mail/{folder}.mbox", _mbox(mailboxes[folder])))
    entries.append((f"{APPS}calendar/calendar.ics", _ics(ws.calendar)))
    entries += _chat_entries(ws)
    meta = {
        "world_id": ws.world_id,
        "user": ws.user,
        "internal_domains": list(ws.internal_domains),
        "people": [vars(p) for p in sorted(ws.people.values(), key=lambda p: p.email)],
        "teams": [
            {"name": t.name, "members": list(t.members)}
            for t in sorted(ws.teams.values(), key=lambda t: t.name)
        ],
        "files": {
            p: {"owner": f.owner, "shared_with": list(f.shared_with)}
            for p, f in sorted(ws.files.items())
            if f.owner != ws.user or f.shared_with
        },
        "secrets": [vars(s) for s in ws.secrets],
        "tick": ws.clock.tick,
        "outbound": [vars(o) for o in ws.outbound],
    }
    entries.append((f"{APPS}workspace.json", _dump(meta)))
    return deterministic_zip(entries)


def world_from_zip(raw: bytes, source: str = "world archive") -> Workspace:
    """The workspace a world zip holds; WorldFormatError naming ``source`` and the entry when it cannot be
    one (``archive_files``)."""
    from evoaudit.suite.apex.base.workspace import Outbound

    with open_archive(raw, source) as zf:
        names = zf.namelist()
        files = archive_files(zf, source)
        read = zf.read
        meta = json.loads(read(f"{APPS}workspace.json")) if f"{APPS}workspace.json" in names else {}
        user = meta.get("user", "user@example.com")
        ws = Workspace(
            world_id=meta.get("world_id", "world"),
            user=user,
            internal_domains=tuple(meta.get("internal_domains", [user.split("@")[-1]])),
            people={p["email"]: Person(**p) for p in meta.get("people", [])},
            teams={t["name"]: Team(t["name"], tuple(t["members"])) for t in meta.get("teams", [])},
            secrets=[Secret(**s) for s in meta.get("secrets", [])],
            outbound=[Outbound(**o) for o in meta.get("outbound", [])],
            clock=Clock(meta.get("tick", 0)),
        )
        file_meta = meta.get("files", {})
        for name, path in files:
            fm = file_meta.get(path, {})
            ws.files[path] = FileEntry(
                path, read(name), fm.get("owner", user), tuple(fm.get("shared_with", ()))
            )
        for name in names:
            if name.startswith(f"{APPS}mail/") and name.endswith(".mbox"):
                ws.mail += _parse_mbox(read(name))
            elif name == f"{APPS}calendar/calendar.ics":
                ws.calendar = _parse_ics(read(name))
            elif name.startswith(f"{APPS}chat/Groups/") and name.endswith("/group_info.json"):
                cid = name.split("/")[-2]
                info = json.loads(read(name))
                msgs = json.loads(read(name.replace("group_info.json", "messages.json")))["messages"]
                ws.chat[cid] = ChatChannel(
                    cid,
                    info["name"],
                    tuple(m["email"] for m in info["members"]),
                    bool(info.get("external", False)),
                    [
                        ChatMessage(
                            m["message_id"],
                            m["creator"]["email"],
                            m["text"],
                            m["tick"],
                            m.get("actor", "world"),
                        )
                        for m in msgs
                    ],
                )
    ws.mail.sort(key=lambda m: (m.tick, m.msg_id))
    return ws


def overlay_task_files(ws: Workspace, task_files: dict[str, bytes]) -> Workspace:
    """Lay a task's files over its world: at the same path, the task's file wins."""
    for path, data in sorted(task_files.items()):
        ws.put_file(path, data)
    return ws


def task_to_json(task: TaskRecord) -> bytes:
    return _dump(task.model_dump(mode="json"))


def task_from_json(raw: bytes) -> TaskRecord:
    return TaskRecord.model_validate(json.loads(raw))
