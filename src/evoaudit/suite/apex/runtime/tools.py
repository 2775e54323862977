"""The workspace tools, one plain function each; MCP (``mcp_server.py``) is only a transport over them.

Every call, whoever makes it (the agent directly, over MCP, or a program through the sandbox's spool), goes
through ``call_tool``: it advances the logical clock and appends a ``CallRecord``, so one record describes the
episode however the tools were reached. Errors the agent should see are ``ToolError`` with their message:
arguments that do not fit the tool's signature (checked against its annotations), paths ``norm_path`` or
``Workspace.put_file`` refuse, and files a parser cannot read. Any other exception is a bug of ours: the call
is recorded with its error and the exception propagates (an episode runner records a harness error).
(No ``from __future__ import annotations`` here: the MCP SDK reads these signatures to build schemas.)
"""

import fnmatch
import functools
import hashlib
import inspect
import json
import re
import threading
from collections.abc import Callable
from typing import Any

import pydantic

from evoaudit.records import recordable
from evoaudit.suite.apex.base import docs
from evoaudit.suite.apex.base.filetext import (
    ToolError,
    file_text,
    parsing,
    shared_out,
    shared_text,
    unencodable,
)
from evoaudit.suite.apex.base.workspace import (
    CalendarEvent,
    CallRecord,
    ChatMessage,
    CopyBack,
    Email,
    Outbound,
    Workspace,
    is_hidden,
    norm_path,
)
from evoaudit.suite.apex.runtime.sandbox import run_in_sandbox

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _key(path: str) -> str:
    try:
        return norm_path(path)
    except ValueError as exc:
        raise ToolError(str(exc)) from exc


# What send_mail and share_file take as an address (a name, a team or a padded string is not one).
ADDRESS = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def _file(ws: Workspace, path: str):
    key = _key(path)
    if key not in ws.files:
        raise ToolError(f"no such file: {path}")
    return ws.files[key]


def _put(ws: Workspace, path: str, data: bytes):
    try:
        entry = ws.put_file(path, data)
    except ValueError as exc:
        raise ToolError(str(exc)) from exc
    shared_out(ws, entry, _ACTOR.get(id(ws), "agent"))
    return entry


# --- files ------------------------------------------------------------------------------------------------


def list_files(ws: Workspace, directory: str = "", include_hidden: bool = False) -> str:
    """List files under a directory, recursively; hidden ones (a part starting with '.') only if asked."""
    prefix = _key(directory)
    prefix = prefix + "/" if prefix else ""
    rows = [
        f"{p}\t{len(f.data)} bytes"
        for p, f in sorted(ws.files.items())
        if p.startswith(prefix) and (include_hidden or not is_hidden(p[len(prefix) :]))
    ]
    return "\n".join(rows) if rows else f"(no files under {directory or '/'})"


def read_file(ws: Workspace, path: str, page: int = 1) -> str:
    """Read a file as text, one page at a time (xlsx, docx and pdf are extracted to text)."""
    entry = _file(ws, path)
    text = file_text(entry.data, entry.kind)
    size = ws.settings.page_chars
    pages = max(1, -(-len(text) // size))
    if not 1 <= page <= pages:
        raise ToolError(f"page {page} out of range 1..{pages}")
    return f"[{entry.path} page {page}/{pages}]\n" + text[(page - 1) * size : page * size]


def search_files(ws: Workspace, query: str, include_hidden: bool = False) -> str:
    """Find files whose path or text contains the query (any case); a glob ('*.xlsx') matches paths."""
    q = query.lower()
    hits = []
    for p, f in sorted(ws.files.items()):
        if is_hidden(p) and not include_hidden:
            continue
        if any(c in query for c in "*?[") and fnmatch.fnmatch(p, query):
            hits.append(p)
            continue
        if q in p.lower():
            hits.append(p)
            continue
        if f.kind in {"md", "txt", "csv", "py", "json"}:
            text = f.data.decode("utf-8", "replace")
            i = text.lower().find(q)
            if i >= 0:
                hits.append(f"{p}: ...{text[max(0, i - 40) : i + 40 + len(q)]}...".replace("\n", " "))
    return "\n".join(hits[:50]) if hits else f"no match for {query!r}"


def write_file(ws: Workspace, path: str, content: str) -> str:
    """Write a text file (created or replaced)."""
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(f"content is not valid UTF-8 text ({exc.reason} at character {exc.start})") from exc
    entry = _put(ws, path, data)
    return f"wrote {entry.path} ({len(entry.data)} bytes)"


def share_file(ws: Workspace, path: str, with_email: str) -> str:
    """Share a file with a person (by email)."""
    entry = _file(ws, path)
    if not ADDRESS.fullmatch(with_email):  # as send_mail requires: a name or a team is not an address
        raise ToolError(f"not an email address: {with_email!r}")
    if with_email not in entry.shared_with:
        entry.shared_with = (*entry.shared_with, with_email)
    if not ws.is_internal(with_email):
        # Sharing outside the firm hands the file over as mailing it would: a record of its text as it is
        # now, which later deletions or a watcher's restoring do not take back.
        text = shared_text(entry)
        ws.outbound.append(Outbound("share", with_email, text, ws.clock.tick, _ACTOR.get(id(ws), "agent")))
    return f"shared {entry.path} with {with_email}"


# --- documents --------------------------------------------------------------------------------------------


def read_sheet(ws: Workspace, path: str, sheet: str = "") -> str:
    """Read one tab of a spreadsheet as rows of comma-separated values (first tab if none given)."""
    entry = _file(ws, path)
    if entry.kind != "xlsx":
        raise ToolError(f"{path} is not an xlsx file")
    try:
        name, rows = docs.read_xlsx(entry.data, sheet or None)
    except KeyError as exc:
        raise ToolError(str(exc.args[0] if exc.args else exc)) from exc
    except Exception as exc:
        raise ToolError(f"cannot read {entry.path} as xlsx: {type(exc).__name__}: {exc}") from exc
    with parsing(f"cannot read {entry.path} as xlsx"):
        names = docs.xlsx_sheets(entry.data)
    body = "\n".join(",".join("" if v is None else str(v) for v in row) for row in rows)
    return f"[{entry.path} sheet {name}; sheets: {', '.join(names)}]\n{body}"


def write_cells(ws: Workspace, path: str, sheet: str, cells: dict[str, float | str]) -> str:
    """Set cells (e.g. {"B2": 9.5}) on a tab of an xlsx file; the file and the tab are created if missing."""
    bad = [c for c in cells if not re.fullmatch(r"[A-Z]{1,3}[1-9][0-9]{0,6}", c)]
    if bad:
        raise ToolError(f"not cell references: {bad}")
    key = _key(path)
    old = ws.files.get(key)
    if old is not None and old.kind != "xlsx":
        raise ToolError(f"{path} is not an xlsx file")
    with parsing(f"cannot write cells to {key}!{sheet}"):
        data = docs.write_xlsx_cells(old.data if old else None, sheet, dict(cells))
    _put(ws, key, data)
    return f"wrote {len(cells)} cell(s) to {key}!{sheet}"


def read_docx(ws: Workspace, path: str) -> str:
    """Read a Word document's paragraphs."""
    entry = _file(ws, path)
    if entry.kind != "docx":
        raise ToolError(f"{path} is not a docx file")
    with parsing(f"cannot read {entry.path} as docx"):
        return docs.read_docx(entry.data)


def write_docx(ws: Workspace, path: str, text: str) -> str:
    """Write a Word document, one paragraph per line of text."""
    key = _key(path)
    if not key.endswith(".docx"):
        raise ToolError("path must end in .docx")
    with parsing(f"cannot write {key}"):
        data = docs.write_docx(text.split("\n"))
    _put(ws, key, data)
    return f"wrote {key}"


def read_pdf(ws: Workspace, path: str, page: int = 1) -> str:
    """Read one page of a PDF as text."""
    entry = _file(ws, path)
    if entry.kind != "pdf":
        raise ToolError(f"{path} is not a pdf file")
    with parsing(f"cannot read {entry.path} as pdf"):
        pages = docs.read_pdf_pages(entry.data)
    if not 1 <= page <= len(pages):
        raise ToolError(f"page {page} out of range 1..{len(pages)}")
    return f"[{entry.path} page {page}/{len(pages)}]\n{pages[page - 1]}"


# --- mail -------------------------------------------------------------------------------------------------


def _mail(ws: Workspace, msg_id: str) -> Email:
    for m in ws.mail:
        if m.msg_id == msg_id:
            return m
    raise ToolError(f"no message with id {msg_id}")


def search_mail(ws: Workspace, query: str = "", folder: str = "") -> str:
    """Search mail by text in sender, subject or body; newest first; at most 30 results."""
    q = query.lower()
    hits = [
        m
        for m in ws.mail
        if (not folder or m.folder == folder) and (not q or q in f"{m.sender} {m.subject} {m.body}".lower())
    ]
    hits.sort(key=lambda m: (-m.tick, m.msg_id))
    rows = [f"{m.msg_id}\t{ws.clock.stamp(m.tick)}\t{m.folder}\t{m.sender}\t{m.subject}" for m in hits[:30]]
    return "\n".join(rows) if rows else "no messages"


def read_mail(ws: Workspace, msg_id: str) -> str:
    """Read one message by id."""
    m = _mail(ws, msg_id)
    cc = f"\nCc: {', '.join(m.cc)}" if m.cc else ""
    head = (
        f"From: {m.sender}\nTo: {', '.join(m.to)}{cc}\nDate: {ws.clock.stamp(m.tick)}\nSubject: {m.subject}"
    )
    return f"{head}\n\n{m.body}"


def _deliver(ws: Workspace, to: list[str], subject: str, body: str, cc: list[str], actor: str) -> Email:
    if not to:
        raise ToolError("at least one recipient is needed")
    bad = [a for a in [*to, *cc] if not ADDRESS.fullmatch(a)]
    if bad:
        raise ToolError(f"not email addresses: {bad}")
    n = _sent_count(ws) + 1
    msg = Email(f"sent-{n:04d}", ws.user, tuple(to), subject, body, ws.clock.tick, tuple(cc), "Sent", actor)
    ws.mail.append(msg)
    for addr in [*to, *cc]:
        if not ws.is_internal(addr):
            ws.outbound.append(Outbound("mail", addr, f"Subject: {subject}\n\n{body}", ws.clock.tick, actor))
    return msg


def _sent_count(ws: Workspace) -> int:
    """Messages in Sent, counting only mail appended since the last call: a program's spool can send
    thousands, and a full count each time made applying them quadratic. The tally lives on the workspace
    (off its fields, so never in its state) and is redone if the mailbox ever shrank."""
    seen, count = getattr(ws, "_sent_tally", (0, 0))
    if seen > len(ws.mail):
        seen, count = 0, 0
    count += sum(1 for m in ws.mail[seen:] if m.folder == "Sent")
    ws._sent_tally = (len(ws.mail), count)  # type: ignore[attr-defined]
    return count


def send_mail(ws: Workspace, to: list[str], subject: str, body: str, cc: list[str] | None = None) -> str:
    """Send an email from the user's mailbox."""
    msg = _deliver(ws, list(to), subject, body, list(cc or []), _ACTOR.get(id(ws), "agent"))
    return f"sent {msg.msg_id} to {', '.join(msg.to)}"


def forward_mail(ws: Workspace, msg_id: str, to: list[str], note: str = "") -> str:
    """Forward a message, with an optional note above it."""
    m = _mail(ws, msg_id)
    quoted = f"---------- Forwarded message ----------\nFrom: {m.sender}\nSubject: {m.subject}\n\n{m.body}"
    body = f"{note}\n\n{quoted}"
    msg = _deliver(ws, list(to), f"Fwd: {m.subject}", body.lstrip("\n"), [], _ACTOR.get(id(ws), "agent"))
    return f"forwarded {m.msg_id} as {msg.msg_id} to {', '.join(msg.to)}"


# --- calendar ---------------------------------------------------------------------------------------------


def list_events(ws: Workspace, start: str = "", end: str = "") -> str:
    """List calendar events overlapping [start, end] (ISO dates or datetimes; both optional)."""
    # An event's description is part of what a calendar shows (on a line of its own, indented).
    rows = [
        f"{e.uid}\t{e.start}\t{e.end}\t{e.title}\t{', '.join(e.attendees)}"
        + (f"\n    {e.description}" if e.description else "")
        for e in sorted(ws.calendar, key=lambda e: (e.start, e.uid))
        if (not start or e.end >= start)
        and (not end or e.start <= end + ("T23:59:59" if len(end) == 10 else ""))
    ]
    return "\n".join(rows) if rows else "no events"


def create_event(
    ws: Workspace, title: str, start: str, end: str, attendees: list[str] | None = None, description: str = ""
) -> str:
    """Create a calendar event (start and end as YYYY-MM-DDTHH:MM:SS)."""
    stamp = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}"
    if not (re.fullmatch(stamp, start) and re.fullmatch(stamp, end)) or end < start:
        raise ToolError("start and end must be YYYY-MM-DDTHH:MM:SS with end >= start")
    uid = f"evt-new-{sum(1 for e in ws.calendar if e.uid.startswith('evt-new-')) + 1:03d}"
    ws.calendar.append(
        CalendarEvent(
            uid,
            title,
            start,
            end,
            ws.user,
            tuple(attendees or ()),
            description,
            "",
            _ACTOR.get(id(ws), "agent"),
        )
    )
    return f"created {uid}"


# --- chat -------------------------------------------------------------------------------------------------


def _channel(ws: Workspace, channel: str):
    for c in ws.chat.values():
        if channel in (c.channel_id, c.name):
            return c
    raise ToolError(f"no channel {channel!r}")


def list_channels(ws: Workspace) -> str:
    """List chat channels with their members and whether they include people outside the firm."""
    return "\n".join(
        f"{c.channel_id}\t{c.name}\t{'external' if c.external else 'internal'}\t{len(c.members)} members"
        for c in sorted(ws.chat.values(), key=lambda c: c.channel_id)
    )


def read_channel(ws: Workspace, channel: str, last: int = 30) -> str:
    """Read the last messages of a channel (by id or name)."""
    c = _channel(ws, channel)
    return (
        "\n".join(f"[{ws.clock.stamp(m.tick)}] {m.sender}: {m.text}" for m in c.messages[-last:]) or "(empty)"
    )


def post_message(ws: Workspace, channel: str, text: str) -> str:
    """Post a message to a channel as the user."""
    c = _channel(ws, channel)
    msg_id = f"{c.channel_id}-m{len(c.messages) + 1:04d}"
    c.messages.append(ChatMessage(msg_id, ws.user, text, ws.clock.tick, _ACTOR.get(id(ws), "agent")))
    return f"posted {msg_id} to {c.name}"


# --- code and answer --------------------------------------------------------------------------------------


# A command is one argv entry of the sandbox launcher; Linux refuses a single one over 128 KiB, so larger
# commands would fail in the launch instead of as the agent's error. Longer programs go in a file.
MAX_COMMAND_BYTES = 64 * 1024


def run_command(ws: Workspace, command: str, timeout: int = 30) -> str:
    """Run a shell command in a sandbox over a copy of the workspace (cwd = the workspace root); no network.
    Programs reach mail, chat and calendar through the `workspace_api` Python module."""
    if "\0" in command:
        raise ToolError("command holds a NUL character")
    size = len(command.encode("utf-8"))
    if size > MAX_COMMAND_BYTES:
        raise ToolError(
            f"command is {size} bytes, over {MAX_COMMAND_BYTES}: write the program to a file and run that"
        )
    text, changes = run_in_sandbox(ws, command, call_tool, timeout)
    # The call's own record is appended next (``_call_tool``), after its program's calls: its seq.
    ws.copied_back = CopyBack(len(ws.calls), changes)
    return text


def submit_answer(ws: Workspace, answer: str) -> str:
    """Submit the final answer to the user's request (ends the task)."""
    ws.final_answer = answer
    return "answer recorded"


# --- registry and dispatch --------------------------------------------------------------------------------

APPS: dict[str, tuple[Callable[..., str], ...]] = {
    "files": (list_files, read_file, search_files, write_file, share_file),
    "documents": (read_sheet, write_cells, read_docx, write_docx, read_pdf),
    "mail": (search_mail, read_mail, send_mail, forward_mail),
    "calendar": (list_events, create_event),
    "chat": (list_channels, read_channel, post_message),
    "code": (run_command,),
    "task": (submit_answer,),
}
TOOLS: dict[str, Callable[..., str]] = {fn.__name__: fn for fns in APPS.values() for fn in fns}
APP_OF: dict[str, str] = {fn.__name__: app for app, fns in APPS.items() for fn in fns}
READ_ONLY = frozenset(
    {
        "list_files",
        "read_file",
        "search_files",
        "read_sheet",
        "read_docx",
        "read_pdf",
        "search_mail",
        "read_mail",
    }
    | {"list_events", "list_channels", "read_channel"}
)
assert all(TOOL_NAME.match(n) for n in TOOLS)

# Who is acting on a workspace during a call (the agent, or "program:<...>" for spool requests).
_ACTOR: dict[int, str] = {}
# Servers may run sync tools in worker threads; one call at a time keeps records ordered.
_LOCK = threading.RLock()


def unbound(fn: Callable[..., str], call: Callable[..., str]) -> Callable[..., str]:
    """``call`` with ``fn``'s signature minus the workspace: what a schema generator (MCP SDK) sees."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())[1:]

    def wrapper(**kwargs: Any) -> str:
        return call(**kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {k: v for k, v in fn.__annotations__.items() if k != "ws"}
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@functools.cache
def tool_schemas() -> tuple[dict[str, Any], ...]:
    """OpenAI function-calling schemas, generated by the MCP SDK from the same signatures it serves.

    Cached: the tool table is fixed at import, and generating the schemas costs a tenth of a second."""
    from mcp.server.mcpserver.tools.base import Tool

    out = []
    for name, fn in TOOLS.items():
        tool = Tool.from_function(unbound(fn, lambda **_: ""), name=name, structured_output=False)
        out.append(
            {
                "type": "function",
                "function": {"name": name, "description": tool.description, "parameters": tool.parameters},
            }
        )
    return tuple(out)


@functools.cache
def _arg_model(name: str) -> type[pydantic.BaseModel]:
    """The tool's parameters as a pydantic model (built once per tool: building costs milliseconds, checking
    microseconds). Lax, as the MCP SDK's own argument model is: "2" is a page number, 5 is not a text."""
    params = list(inspect.signature(TOOLS[name]).parameters.values())[1:]
    fields: dict[str, Any] = {
        p.name: (p.annotation, ... if p.default is inspect.Parameter.empty else p.default) for p in params
    }
    config = pydantic.ConfigDict(extra="forbid")
    return pydantic.create_model(f"{name}_arguments", __config__=config, **fields)


@functools.cache
def _int_params(name: str) -> frozenset[str]:
    params = list(inspect.signature(TOOLS[name]).parameters.values())[1:]
    return frozenset(p.name for p in params if p.annotation is int)


def _as_given(given: Any, valid: Any) -> Any:
    """The caller's value where checking only widened an int to a float (a cell written as 5 stays 5, so the
    file's bytes are what the caller asked for), else the checked value."""
    if type(given) is int and type(valid) is float and given == valid:
        return given
    if isinstance(given, dict) and isinstance(valid, dict) and given.keys() == valid.keys():
        return {k: _as_given(given[k], v) for k, v in valid.items()}
    if isinstance(given, list) and isinstance(valid, list) and len(given) == len(valid):
        return [_as_given(g, v) for g, v in zip(given, valid, strict=True)]
    return valid


def check_arguments(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` checked against the tool's signature, with defaults filled in; ToolError naming each
    argument that does not fit (missing, unknown, of the wrong type, or text that is not valid UTF-8)."""
    if not isinstance(args, dict):
        raise ToolError(f"bad arguments for {name}: expected an object of named arguments")
    bad = unencodable(args)
    if bad is not None:
        raise ToolError(f"bad arguments for {name}: {bad}: text is not valid UTF-8 (a lone surrogate)")
    # Lax checking reads true as 1; a flag where a number is wanted is the caller's mistake.
    ints = _int_params(name)
    flags = [
        f"{k}: expected an integer, not true/false" for k, v in args.items() if k in ints and type(v) is bool
    ]
    if flags:
        raise ToolError(f"bad arguments for {name}: {'; '.join(flags)}")
    try:
        valid = _arg_model(name).model_validate(args)
    except pydantic.ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            where = ".".join(str(part) for part in err["loc"]) or "arguments"
            problems.append(f"{where}: {err['msg']}")
        raise ToolError(f"bad arguments for {name}: {'; '.join(problems)}") from exc
    return {k: _as_given(args[k], v) if k in args else v for k, v in dict(valid).items()}


def call_tool(ws: Workspace, name: str, args: dict[str, Any], actor: str = "agent") -> tuple[str, str | None]:
    """Run one tool on ``ws`` and record it: (the text the caller sees, the error text or None).

    An exception other than ``ToolError`` is recorded as the call's error and then raised again."""
    with _LOCK:
        return _call_tool(ws, name, args, actor)


def _call_tool(ws: Workspace, name: str, args: dict[str, Any], actor: str) -> tuple[str, str | None]:
    tick = ws.clock.advance()
    fn = TOOLS.get(name)
    result, error, crash = "", None, None
    prev = _ACTOR.get(id(ws))
    _ACTOR[id(ws)] = actor
    try:
        if fn is None:
            raise ToolError(f"unknown tool {name!r}")
        # Recorded with defaults filled in, so a call made directly and one through MCP (whose server hands
        # the raw arguments here too) are the same record.
        args = check_arguments(name, args)
        result = fn(ws, **args)
    except ToolError as exc:
        error = str(exc)
    except Exception as exc:
        error, crash = f"internal error: {type(exc).__name__}: {exc}", exc
    finally:
        if prev is None:
            _ACTOR.pop(id(ws), None)
        else:
            _ACTOR[id(ws)] = prev
    record = CallRecord(
        len(ws.calls),
        tick,
        name,
        recordable(json.loads(json.dumps(args, default=repr))),
        result,
        error,
        actor,
    )
    ws.calls.append(record)
    if crash is not None:
        raise crash
    # Observers (a watcher) act after the call is recorded, so the caller already saw the original bytes.
    for observer in list(ws.observers):
        observer.after_call(ws, record)
    return (error if error is not None else result), error


def record_digest(ws: Workspace) -> str:
    return hashlib.sha256(json.dumps([vars(c) for c in ws.calls], sort_keys=True).encode()).hexdigest()
