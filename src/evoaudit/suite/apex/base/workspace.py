"""The typed workspace an APEX-Harm episode acts on: files, mail, calendar, chat, people, secrets.

Everything is plain data; tools (``runtime/tools.py``) are the only code that changes it during an episode.
Time is a logical clock (one tick per tool call), never wall time, so a replayed episode produces the same
bytes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple

from evoaudit.suite.apex.base.limits import Limits

# The logical clock's origin: tick 0. Ticks are minutes after it.
EPOCH = datetime(2026, 3, 2, 9, 0, 0)

FileKind = Literal["xlsx", "docx", "pdf", "csv", "md", "txt", "py", "json", "bin", "other"]
SecretKind = Literal["passphrase", "ssh_key", "otp_email", "client_code", "credit_score"]

_KINDS = {"xlsx", "docx", "pdf", "csv", "md", "txt", "py", "json"}


def kind_of(path: str) -> FileKind:
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    if ext in _KINDS:
        return ext  # type: ignore[return-value]
    return "bin" if ext in {"pyc", "so", "bin", "elf"} else "other"


# Limits a workspace file must fit on any POSIX filesystem: the sandbox writes every file to a real one.
NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 1024


# Where ``run_command``'s sandbox mounts the workspace (``runtime/sandbox.py``).
WORKSPACE_MOUNT = "/workspace"


def norm_path(path: str) -> str:
    """Workspace paths are relative to ``filesystem/``, '/'-separated, without '.' or '..' parts; an
    absolute ``/workspace/...`` path (where commands run) names the same file as the relative one.

    Raises ValueError, saying why, for a path no real filesystem under the workspace could hold: one that
    leaves it ('..'), names a drive, holds a NUL or another control character (C0, DEL) or a character
    UTF-8 cannot encode, or has a part over 255 bytes or a total over 1024 bytes."""
    text = str(path).replace("\\", "/")
    shown = repr(text) if len(text) <= 80 else repr(text[:80]) + "..."
    if "\0" in text:
        raise ValueError(f"path {shown} holds a NUL character")
    # A newline or an escape sequence in a name would forge lines of a listing (list_files, a report).
    bad = next((c for c in text if c < " " or c == "\x7f"), None)
    if bad is not None:
        raise ValueError(f"path {shown} holds a control character ({bad!r})")
    # The workspace is the agent's whole filesystem, so "/reports" names "reports" (models write both);
    # a drive letter names nothing here.
    if re.match(r"[A-Za-z]:/", text):
        raise ValueError(f"path {shown} names a drive; workspace paths are relative to its root")
    # ``run_command`` runs in ``/workspace``, so the absolute paths its output shows name workspace files.
    if text == WORKSPACE_MOUNT or text.startswith(WORKSPACE_MOUNT + "/"):
        text = text[len(WORKSPACE_MOUNT) :]
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"path {shown} leaves the workspace ('..' is not allowed)")
    try:
        sizes = [len(p.encode("utf-8")) for p in parts]
    except UnicodeEncodeError as exc:
        raise ValueError(f"path {shown} is not valid UTF-8 ({exc.reason})") from None
    if any(n > NAME_MAX_BYTES for n in sizes):
        raise ValueError(f"path {shown} has a part over {NAME_MAX_BYTES} bytes")
    if sum(sizes) + len(sizes) > PATH_MAX_BYTES:
        raise ValueError(f"path {shown} is over {PATH_MAX_BYTES} bytes")
    return "/".join(parts)


def path_clash(files: dict[str, Any], path: str) -> str | None:
    """The existing file that ``path`` (normalised) cannot coexist with, or None.

    A file cannot be a folder too: ``a`` and ``a/b`` both existing would make the workspace impossible to
    write to a filesystem."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        parent = "/".join(parts[:i])
        if parent in files:
            return parent
    prefix = path + "/"
    return next((p for p in files if p.startswith(prefix)), None)


def is_hidden(path: str) -> bool:
    return any(part.startswith(".") for part in path.split("/"))


@dataclass
class Clock:
    tick: int = 0

    def advance(self) -> int:
        self.tick += 1
        return self.tick

    def stamp(self, tick: int | None = None) -> str:
        return (EPOCH + timedelta(minutes=self.tick if tick is None else tick)).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass
class FileEntry:
    path: str
    data: bytes
    owner: str
    shared_with: tuple[str, ...] = ()

    @property
    def kind(self) -> FileKind:
        return kind_of(self.path)

    @property
    def hidden(self) -> bool:
        return is_hidden(self.path)


@dataclass(frozen=True)
class Person:
    email: str
    name: str
    team: str

    @property
    def domain(self) -> str:
        return self.email.rsplit("@", 1)[-1]


@dataclass(frozen=True)
class Team:
    name: str
    members: tuple[str, ...]


@dataclass
class Email:
    msg_id: str
    sender: str
    to: tuple[str, ...]
    subject: str
    body: str
    tick: int
    cc: tuple[str, ...] = ()
    folder: str = "INBOX"
    actor: str = "world"


@dataclass
class CalendarEvent:
    uid: str
    title: str
    start: str  # "YYYY-MM-DDTHH:MM:SS", local workspace time
    end: str
    organizer: str
    attendees: tuple[str, ...] = ()
    description: str = ""
    location: str = ""
    actor: str = "world"


@dataclass
class ChatMessage:
    msg_id: str
    sender: str
    text: str
    tick: int
    actor: str = "world"


@dataclass
class ChatChannel:
    channel_id: str
    name: str
    members: tuple[str, ...]
    external: bool
    messages: list[ChatMessage] = field(default_factory=list)


@dataclass(frozen=True)
class Secret:
    """A planted asset; ``marker`` is a string that occurs nowhere else, so a leak is a substring test."""

    kind: SecretKind
    marker: str
    location: str  # a file path, or "mail:<msg_id>"


@dataclass
class Outbound:
    """A record that left the workspace (the stand-in for the external network)."""

    channel: str  # "mail" | "http" | "share" (a file shared with an outside address)
    destination: str
    payload: str
    tick: int
    actor: str


@dataclass
class CallRecord:
    """One tool call as the tool layer saw it, whoever made it (the agent, or a program it ran)."""

    seq: int
    tick: int
    tool: str
    args: dict[str, Any]
    result: str
    error: str | None
    actor: str


class FileChange(NamedTuple):
    """One file ``run_command``'s copy-back applied: its new bytes, or None when the program deleted it."""

    path: str
    data: bytes | None


@dataclass(frozen=True)
class CopyBack:
    """What the last ``run_command`` copied back (``runtime/sandbox.py``): the seq of its call's record and
    the changes, in the order they were applied."""

    seq: int
    changes: tuple[FileChange, ...]


@dataclass
class Settings:
    allow_unsandboxed: bool = False
    sandbox: Literal["auto", "bwrap", "unshare", "none"] = "auto"
    # run_command's limits (suite.apex.run_limits); their defaults are limits.Limits', in one place.
    cpu_seconds: int = Limits.cpu_seconds
    memory_mb: int = Limits.memory_mb
    timeout_seconds: float = 30.0
    max_processes: int = Limits.max_processes
    file_size_mb: int = Limits.file_size_mb
    output_kb: int = Limits.output_kb
    tmp_mb: int = Limits.tmp_mb
    page_chars: int = 4000


@dataclass
class Workspace:
    world_id: str
    user: str  # the email of the person the agent works for
    internal_domains: tuple[str, ...]
    people: dict[str, Person] = field(default_factory=dict)
    teams: dict[str, Team] = field(default_factory=dict)
    files: dict[str, FileEntry] = field(default_factory=dict)
    mail: list[Email] = field(default_factory=list)
    calendar: list[CalendarEvent] = field(default_factory=list)
    chat: dict[str, ChatChannel] = field(default_factory=dict)
    secrets: list[Secret] = field(default_factory=list)
    outbound: list[Outbound] = field(default_factory=list)
    clock: Clock = field(default_factory=Clock)
    calls: list[CallRecord] = field(default_factory=list)
    final_answer: str | None = None
    settings: Settings = field(default_factory=Settings)
    # Observers the tool layer calls after every recorded call (``observer.after_call(ws, record)``), e.g.
    # a dynamic attack's watcher. They live on the workspace so a copy or a replay carries them and their
    # state deterministically; what they do is logged in ``observer_log`` (plain JSON rows).
    observers: list[Any] = field(default_factory=list)
    observer_log: list[dict[str, Any]] = field(default_factory=list)
    # The last run_command's copy-back, for whoever records the call (the tool transports, replay). Only
    # the last: a workspace never holds an episode's history of bytes. Not part of the state.
    copied_back: CopyBack | None = field(default=None, compare=False, repr=False)
    # Replay's hook into the copy-back (``replay.apex``): given a path a program wrote and its bytes, the
    # bytes to write instead (the recorded ones, where a re-run wrote others). None: the program's own.
    copy_back_bytes: Callable[[str, bytes], bytes] | None = field(default=None, compare=False, repr=False)

    def is_internal(self, address: str) -> bool:
        return address.rsplit("@", 1)[-1].lower() in self.internal_domains

    def put_file(self, path: str, data: bytes, owner: str | None = None) -> FileEntry:
        """Create or replace a file. ValueError for a name ``norm_path`` refuses or that clashes with an
        existing file or folder (a file ``a`` and a file ``a/b``)."""
        path = norm_path(path)
        if not path:
            raise ValueError("a file needs a name (the path is empty)")
        old = self.files.get(path)
        clash = None if old is not None else path_clash(self.files, path)
        if clash is not None and path.startswith(clash + "/"):
            raise ValueError(f"cannot create {path}: {clash} is a file, not a folder")
        if clash is not None:
            raise ValueError(f"cannot create {path}: it is a folder (it holds {clash})")
        entry = FileEntry(
            path, data, owner or (old.owner if old else self.user), old.shared_with if old else ()
        )
        self.files[path] = entry
        return entry

    def copy(self) -> Workspace:
        return copy.deepcopy(self)

    def state(self) -> dict[str, Any]:
        """The terminal state as plain JSON data (file bytes as sha256, so it stays small)."""
        import hashlib

        return {
            "files": {
                p: {
                    "sha256": hashlib.sha256(f.data).hexdigest(),
                    "owner": f.owner,
                    "shared_with": list(f.shared_with),
                }
                for p, f in sorted(self.files.items())
            },
            "mail": [vars(m) | {"to": list(m.to), "cc": list(m.cc)} for m in self.mail],
            "calendar": [vars(e) | {"attendees": list(e.attendees)} for e in self.calendar],
            "chat": {
                c.channel_id: [vars(m) for m in c.messages]
                for c in sorted(self.chat.values(), key=lambda c: c.channel_id)
            },
            "outbound": [vars(o) for o in self.outbound],
            "final_answer": self.final_answer,
            "tick": self.clock.tick,
        }
