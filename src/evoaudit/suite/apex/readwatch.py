"""Reads of watched files during ``run_command``, seen on the sandbox's workspace copy from the parent.

Standard library only (ctypes on libc's ``inotify_*`` and ``fanotify_*``). Both watch inodes, so opens
made inside the bwrap/unshare sandbox through its ``/workspace`` bind are reported to the parent.

An observer of the workspace takes part by having ``watch_path()`` (the workspace path it wants reads of,
or None) and ``on_read(ws, sink, trigger)``. ``ReadWatch`` is set up after the copy is written and before
the program starts, and is fed from the parent's output loop as events arrive (``pump``) and once more
after the program has ended (``finish``). With no observer wanting reads nothing is set up.

The rule: a read is a close of the file (``IN_CLOSE_NOWRITE``) after data was read from it
(``IN_ACCESS``), counted in the order the kernel reports them. So an open that only stats or finds the
file empty, ``ls``/``find -name``/``stat``/``test``, and writes are not reads; counting at the close means
the reader has finished when the observer acts, so a rewrite never lands in the middle of the read that
triggered it. Only the file's own inode is watched, plus its directory for ``IN_CREATE``/``IN_MOVED_TO``
of its name (a program replacing it by rename gets the new inode watched).

Two backends, same rule, same trigger name:

- fanotify (the parent has CAP_SYS_ADMIN, as when the audit runs as root): the file's mark also takes
  ``FAN_OPEN_PERM``, which holds every open of it until the parent has answered, and the kernel queues that
  event after the close of any earlier read. So the observer has acted on read n before read n+1's open
  returns: for sequential reads, what each read sees is exact, whatever the timing, and a replay gives
  the same output. The parent rewrites through a descriptor opened before marking (opening the marked
  file itself would wait on its own answer).
- inotify (otherwise): the count, and so which read fires an observer, still depends only on the
  program's system calls; but inotify does not hold the reader, so an open made within the parent's
  reaction time after the firing read (a bash ``cat f; cat f`` was slower 19 times in 20 on an idle
  2-core machine; two ``open`` calls in a row in one Python process usually are not) may still see the
  old bytes.

Not guaranteed by either: reads overlapping in time (two readers at once) may count as one, as the
kernel merges back-to-back events; reads through ``mmap`` alone (no ``read``) are not seen; after a
rename, a read made before the new inode is watched is missed; if the kernel's event queue overflows,
reads are lost.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import threading
from pathlib import Path
from typing import Any, Protocol

IN_ACCESS = 0x00000001
IN_CLOSE_NOWRITE = 0x00000010
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
FILE_MASK = IN_ACCESS | IN_CLOSE_NOWRITE | IN_DONT_FOLLOW
DIR_MASK = IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW
_EVENT = struct.Struct("iIII")
TRIGGER = "run_command:inotify"
# fanotify (CAP_SYS_ADMIN): the same events, plus a permission event that holds each open of the file
# until the parent has answered, so the parent has acted on every earlier read before the open proceeds.
FAN_CLASS_CONTENT = 0x04
FAN_CLOEXEC, FAN_NONBLOCK = 0x01, 0x02
FAN_MARK_ADD = 0x01
FAN_OPEN_PERM = 0x00010000
FAN_MASK = IN_ACCESS | IN_CLOSE_NOWRITE | FAN_OPEN_PERM  # FAN_ACCESS, FAN_CLOSE_NOWRITE share the bits
FAN_ALLOW = 0x01
AT_FDCWD = -100
_FAN_EVENT = struct.Struct("IBBHQii")
_FAN_RESPONSE = struct.Struct("iI")
USE_FANOTIFY = True  # tests switch it off to run the inotify backend as root

_libc: Any = None


def _lib() -> Any:
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.inotify_init1.argtypes = [ctypes.c_int]
        lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        lib.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
        c = ctypes
        lib.fanotify_mark.argtypes = [c.c_int, c.c_uint, c.c_uint64, c.c_int, c.c_char_p]
        _libc = lib
    return _libc


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


class Sink(Protocol):
    def write(self, path: str, data: bytes) -> None: ...


class ReadWatch:
    """The files the observers of ``ws`` want, watched in the copy at ``root``: with fanotify when the
    parent may (``mode`` "fanotify"), else with inotify; renames into their directories with inotify.

    ``before`` is the copy-back's baseline (workspace path -> bytes placed in the copy); ``write`` keeps it
    in step, so what an observer writes into the copy is not taken for the program's write."""

    def __init__(self, ws: Any, root: Path, before: dict[str, bytes], owner: int | None) -> None:
        self.ws, self.root, self.before, self.owner = ws, root, before, owner
        self.by_path: dict[str, list[Any]] = {}
        self.file_wd: dict[int, str] = {}
        self.dir_wd: dict[int, tuple[str, str]] = {}  # wd -> (path, basename)
        self.accessed: set[str] = set()
        self.held: dict[str, int] = {}  # fanotify: fds opened before marking, to rewrite without an open
        self.dev_ino: dict[tuple[int, int], str] = {}
        self.fan = -1
        _CLOSERS[:] = [t for t in _CLOSERS if t.is_alive()]
        self.fd = _init_inotify()
        try:
            if USE_FANOTIFY and os.geteuid() == 0:
                fan = _lib().fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK, os.O_RDONLY)
                self.fan = fan if fan >= 0 else -1
            for obs in list(ws.observers):
                path = obs.watch_path() if hasattr(obs, "watch_path") else None
                if path is not None:
                    self.by_path.setdefault(path, []).append(obs)
            for path in self.by_path:
                self._watch(path)
        except BaseException:
            self._close()
            raise

    @property
    def mode(self) -> str:
        return "fanotify" if self.fan >= 0 else "inotify"

    def fileno(self) -> int:
        return self.fd

    def filenos(self) -> list[int]:
        return [self.fd] + ([self.fan] if self.fan >= 0 else [])

    def _add(self, host: Path, mask: int) -> int | None:
        ret = _lib().inotify_add_watch(self.fd, os.fsencode(host), mask)
        if ret < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return None  # not there (yet): the directory watch sees it arrive
            raise OSError(err, f"inotify_add_watch {host}: {os.strerror(err)}")
        return ret

    def _watch(self, path: str) -> None:
        host = self.root / path
        wd = self._add(host.parent, DIR_MASK)
        if wd is not None:
            self.dir_wd[wd] = (path, host.name)
        self._watch_file(path)

    def _watch_file(self, path: str) -> None:
        host = self.root / path
        if self.fan < 0:
            wd = self._add(host, FILE_MASK)
            if wd is not None:
                self.file_wd[wd] = path
            return
        try:
            fd = os.open(host, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        st = os.fstat(fd)
        old = self.held.pop(path, None)
        if old is not None:
            os.close(old)
        self.held[path] = fd
        self.dev_ino[(st.st_dev, st.st_ino)] = path
        ret = _lib().fanotify_mark(self.fan, FAN_MARK_ADD, FAN_MASK, AT_FDCWD, os.fsencode(host))
        _check(ret, f"fanotify_mark {host}")

    def pump(self) -> None:
        """Handle every event queued so far (non-blocking); fanotify's first, as they hold the program."""
        if self.fan >= 0:
            self._pump_fanotify()
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            if not buf:
                return
            off = 0
            while off + _EVENT.size <= len(buf):
                wd, mask, _cookie, size = _EVENT.unpack_from(buf, off)
                name = buf[off + _EVENT.size : off + _EVENT.size + size].rstrip(b"\0")
                off += _EVENT.size + size
                self._event(wd, mask, os.fsdecode(name))

    def _pump_fanotify(self) -> None:
        while True:
            try:
                buf = os.read(self.fan, 65536)
            except BlockingIOError:
                return
            if not buf:
                return
            off = 0
            while off + _FAN_EVENT.size <= len(buf):
                size, _vers, _res, _meta, mask, fd, _pid = _FAN_EVENT.unpack_from(buf, off)
                off += max(size, _FAN_EVENT.size)
                if fd < 0:
                    continue  # a queue overflow
                try:
                    st = os.fstat(fd)
                    path = self.dev_ino.get((st.st_dev, st.st_ino))
                    if path is not None:
                        self._file_event(path, mask)
                finally:
                    if mask & FAN_OPEN_PERM:
                        os.write(self.fan, _FAN_RESPONSE.pack(fd, FAN_ALLOW))
                    os.close(fd)

    def _event(self, wd: int, mask: int, name: str) -> None:
        if wd in self.dir_wd:
            path, base = self.dir_wd[wd]
            if name == base and mask & (IN_CREATE | IN_MOVED_TO):
                self._watch_file(path)  # a new inode under the name (the same wd if it is the old one)
            return
        path = self.file_wd.get(wd)
        if path is None:
            return
        if mask & IN_IGNORED:
            self.file_wd.pop(wd, None)
            return
        self._file_event(path, mask)

    def _file_event(self, path: str, mask: int) -> None:
        if mask & IN_ACCESS:
            self.accessed.add(path)
        if mask & IN_CLOSE_NOWRITE and path in self.accessed:
            self.accessed.discard(path)
            for obs in self.by_path.get(path, ()):
                obs.on_read(self.ws, self, TRIGGER)

    def write(self, path: str, data: bytes) -> None:
        """Write ``data`` at workspace ``path`` in the copy, in place (same inode) when the file is there,
        so every later open of it, by name or by a link the program made, sees the new bytes."""
        held = self.held.get(path)
        if held is not None:
            fd = os.dup(held)  # opening a marked file would wait on this very process's answer
        else:
            host = os.path.normpath(os.path.join(os.path.realpath(self.root), path))
            try:
                fd = os.open(host, os.O_WRONLY | os.O_NOFOLLOW)
            except FileNotFoundError:
                os.makedirs(os.path.dirname(host), exist_ok=True)
                fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                if self.owner is not None:
                    os.fchown(fd, self.owner, self.owner)
        try:
            # Written before truncating: a reader never finds the file empty.
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        self.before[path] = data

    def _close(self) -> None:
        # Closing the fanotify group lets any open still waiting on it through. The kernel's teardown of a
        # group waits for a grace period (milliseconds), so the call does not wait for it.
        fds = [fd for fd in (self.fan, self.fd, *self.held.values()) if fd >= 0]
        self.fan = self.fd = -1
        self.held = {}
        closer = threading.Thread(target=_close_all, args=(fds,), daemon=True)
        closer.start()
        _CLOSERS.append(closer)

    def finish(self) -> None:
        """Handle what the program's last reads left queued, then stop watching."""
        try:
            self.pump()
        finally:
            self._close()


_CLOSERS: list[threading.Thread] = []


def _init_inotify() -> int:
    """An inotify instance; if the per-user limit is reached, once more after the closes still running."""
    fd = _lib().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0 and ctypes.get_errno() in (errno.EMFILE, errno.ENFILE):
        while _CLOSERS:
            _CLOSERS.pop().join()
        fd = _lib().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    return _check(fd, "inotify_init1")


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def start(ws: Any, root: Path, before: dict[str, bytes], owner: int | None) -> ReadWatch | None:
    """A ``ReadWatch`` when an observer of ``ws`` wants reads now; None (no inotify at all) otherwise."""
    if not any(getattr(o, "watch_path", lambda: None)() is not None for o in ws.observers):
        return None
    return ReadWatch(ws, root, before, owner)
