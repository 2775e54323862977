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
of its name (a program replacing it by rename gets the new inode watched, if the path to it is still
plain folders).

Two backends, same rule, same trigger name:

- fanotify (the parent has CAP_SYS_ADMIN, as when the audit runs as root): the file's mark also takes
  ``FAN_OPEN_PERM``, which holds every open of it until the parent has answered, and the kernel queues that
  event after the close of any earlier read. So the observer has acted on read n before read n+1's open
  returns: for sequential reads, what each read sees is exact, whatever the timing, and a replay gives
  the same output.
- inotify (otherwise): the count, and so which read fires an observer, still depends only on the
  program's system calls; but inotify does not hold the reader, so an open made within the parent's
  reaction time after the firing read (a bash ``cat f; cat f`` was slower 19 times in 20 on an idle
  2-core machine; two ``open`` calls in a row in one Python process usually are not) may still see the
  old bytes.

The program owns the copy's tree and the parent runs as root, so the parent touches the copy only in
ways it cannot redirect or stall:

- Paths are resolved one component at a time beneath ``root_fd`` (the copy's root, opened before the
  program starts) with ``O_PATH | O_NOFOLLOW``: a component that is a link or not a folder is refused
  (``Refused``), never followed. Watches and marks go through the resolved descriptor
  (``/proc/self/fd/N``, ``fanotify_mark(fd, NULL)``), never a name.
- The parent never blocks on its own permission event. An ``O_PATH`` open is not held by fanotify, and
  its fd pins the inode; the parent then opens that inode for real only if it is not marked, and a
  marked one only through the read-write fd it opened before marking it (``held``). Marks are added
  only by this thread, so no open of a marked inode can slip in between.
- ``put`` writes a firing's files all or none: every path is resolved, and new files are made under a
  random name, before anything visible changes; a refusal is a note and the observer does not fire. A
  name that is a link the program made to a watched file is replaced (rename), not written through.
- Trouble (a refused path, a watch limit) is a line in the command's notes, not an exception; every
  fanotify event read is answered and closed; one pump handles events for at most ``PUMP_SLICE``.

Not guaranteed by either: reads overlapping in time (two readers at once) may count as one, as the
kernel merges back-to-back events; reads through ``mmap`` alone (no ``read``) are not seen; after a
rename, a read made before the new inode is watched is missed; if the kernel's event queue overflows,
reads are lost.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import struct
import threading
import time
from pathlib import Path
from typing import Any, Protocol

IN_ACCESS = 0x00000001
IN_CLOSE_NOWRITE = 0x00000010
IN_OPEN = 0x00000020
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
# No IN_DONT_FOLLOW: watches are added through /proc/self/fd/N, a link that must be followed.
FILE_MASK = IN_ACCESS | IN_CLOSE_NOWRITE | IN_OPEN
DIR_MASK = IN_CREATE | IN_MOVED_TO | IN_ONLYDIR
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
_FAN_EVENT = struct.Struct("IBBHQii")
_FAN_RESPONSE = struct.Struct("iI")
USE_FANOTIFY = True  # tests switch it off to run the inotify backend as root
# The longest one pump handles events before the output loop (and its deadline) gets a turn.
PUMP_SLICE = 0.25

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
    mode: str

    def put(self, items: list[tuple[str, bytes]]) -> bool: ...


class Refused(OSError):
    """A path in the copy the parent will not touch: a component is a link or not a folder."""


def _parts(path: str) -> list[str]:
    parts = path.split("/")
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise Refused(errno.EINVAL, f"{path!r} is not a plain relative path")
    return parts


def _via(fd: int) -> str:
    # The kernel's name for exactly the inode ``fd`` holds; following it resolves nothing by name.
    return f"/proc/self/fd/{fd}"


class ReadWatch:
    """The files the observers of ``ws`` want, watched in the copy at ``root``: with fanotify when the
    parent may (``mode`` "fanotify"), else with inotify; renames into their directories with inotify.

    ``before`` is the copy-back's baseline (workspace path -> bytes placed in the copy); ``put`` keeps it
    in step, so what an observer writes into the copy is not taken for the program's write. Anything that
    goes wrong is a line in ``notes`` (the command's notes), never an exception out of ``pump``."""

    def __init__(
        self, ws: Any, root: Path, before: dict[str, bytes], owner: int | None, notes: list[str]
    ) -> None:
        self.ws, self.before, self.owner, self.notes = ws, before, owner, notes
        self.by_path: dict[str, list[Any]] = {}
        self.file_wd: dict[int, str] = {}
        self.dir_wd: dict[int, tuple[str, str]] = {}  # wd -> (path, basename)
        self.accessed: set[str] = set()
        # fanotify: every marked inode, with a read-write fd opened before marking it; the parent writes
        # a marked inode only through this fd (see ``_rw``).
        self.held: dict[tuple[int, int], int] = {}
        self.dev_ino: dict[tuple[int, int], str] = {}
        self.fan = self.fd = self.root_fd = -1
        _CLOSERS[:] = [t for t in _CLOSERS if t.is_alive()]
        try:
            # Opened before the program starts: later renames inside the copy cannot move it.
            self.root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            self.fd = _init_inotify()
            if USE_FANOTIFY and os.geteuid() == 0:
                fan = _lib().fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC | FAN_NONBLOCK, os.O_RDONLY)
                if fan < 0:
                    err = ctypes.get_errno()
                    self.note(f"fanotify unavailable ({os.strerror(err)}): reads watched with inotify")
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

    def note(self, text: str) -> None:
        line = f"[sandbox: {text}]"
        if line not in self.notes and len(self.notes) < 50:  # one line per distinct trouble
            self.notes.append(line)

    def fileno(self) -> int:
        return self.fd

    def filenos(self) -> list[int]:
        return [self.fd] + ([self.fan] if self.fan >= 0 else [])

    # --- paths in the copy: resolved one component at a time beneath ``root_fd``, never following a link

    def _dir(self, parts: list[str], create: bool) -> int | None:
        """An O_PATH fd of the folder ``parts`` in the copy (None if missing and not ``create``)."""
        fd = os.dup(self.root_fd)
        try:
            for i, part in enumerate(parts):
                flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                try:
                    nxt = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    os.mkdir(part, 0o755, dir_fd=fd)  # mkdirat never follows a link at ``part``
                    if self.owner is not None:
                        os.chown(part, self.owner, self.owner, dir_fd=fd, follow_symlinks=False)
                    nxt = os.open(part, flags, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST):
                        where = "/".join(parts[: i + 1])
                        raise Refused(errno.ENOTDIR, f"{where!r} is a link or not a folder") from None
                    raise
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _leaf(self, dfd: int, name: str, path: str) -> tuple[int, os.stat_result] | None:
        """An O_PATH fd of the regular file ``name`` in ``dfd`` and its stat (None if missing).

        An O_PATH open is never held by fanotify, and the fd pins the inode that was checked."""
        try:
            fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except FileNotFoundError:
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise Refused(errno.EINVAL, f"{path!r} is a link or not a regular file")
        return fd, st

    def _rw(self, pfd: int, st: os.stat_result) -> int:
        """A read-write fd of the inode ``pfd`` pins. Marked inodes are exactly the keys of ``held``, and
        only this thread marks, so the reopen below is only ever of an unmarked inode: the parent never
        makes an open that waits on its own permission event."""
        held = self.held.get((st.st_dev, st.st_ino))
        if held is not None:
            return os.dup(held)
        return os.open(_via(pfd), os.O_RDWR | os.O_CLOEXEC)

    # --- watching

    def _add(self, fd: int, mask: int) -> int:
        ret = _lib().inotify_add_watch(self.fd, os.fsencode(_via(fd)), mask)
        return _check(ret, "inotify_add_watch")

    def _watch(self, path: str) -> None:
        parts = _parts(path)
        dfd = self._dir(parts[:-1], create=False)
        if dfd is None:
            return  # no folder: nothing to watch (as before a first write)
        try:
            self.dir_wd[self._add(dfd, DIR_MASK)] = (path, parts[-1])
        finally:
            os.close(dfd)
        self._watch_file(path)

    def _watch_file(self, path: str) -> None:
        parts = _parts(path)
        dfd = self._dir(parts[:-1], create=False)
        if dfd is None:
            return
        try:
            got = self._leaf(dfd, parts[-1], path)
        finally:
            os.close(dfd)
        if got is None:
            return  # not there (yet): the directory watch sees it arrive
        pfd, st = got
        try:
            key = (st.st_dev, st.st_ino)
            self.dev_ino[key] = path
            if self.fan < 0:
                self.file_wd[self._add(pfd, FILE_MASK)] = path
                return
            if key in self.held:
                return  # already marked (a rename back, a link): nothing to open
            fd = self._rw(pfd, st)
            self.held[key] = fd  # before marking: from now on it is reached only through ``held``
            ret = _lib().fanotify_mark(self.fan, FAN_MARK_ADD, FAN_MASK, fd, None)
            _check(ret, "fanotify_mark")
        finally:
            os.close(pfd)

    # --- events

    def pump(self) -> None:
        """Handle the events queued so far (non-blocking, at most one time slice per queue); fanotify's
        first, as they hold the program."""
        if self.fan >= 0:
            self._pump_fanotify(time.monotonic() + PUMP_SLICE)
        end = time.monotonic() + PUMP_SLICE
        while time.monotonic() < end:
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
                self._guarded(self._event, wd, mask, os.fsdecode(name))

    def _pump_fanotify(self, end: float) -> None:
        while time.monotonic() < end:
            try:
                buf = os.read(self.fan, 65536)
            except BlockingIOError:
                return
            if not buf:
                return
            events = []
            off = 0
            while off + _FAN_EVENT.size <= len(buf):
                size, _vers, _res, _meta, mask, fd, _pid = _FAN_EVENT.unpack_from(buf, off)
                off += max(size, _FAN_EVENT.size)
                if fd >= 0:  # else a queue overflow
                    events.append((mask, fd))
            try:
                for mask, fd in events:
                    self._guarded(self._fan_event, mask, fd)
            finally:
                # Every event answered and closed, whatever happened above: the program is never left held.
                for mask, fd in events:
                    if mask & FAN_OPEN_PERM:
                        with contextlib.suppress(OSError):  # the group's close lets it through then
                            os.write(self.fan, _FAN_RESPONSE.pack(fd, FAN_ALLOW))
                    os.close(fd)

    def _fan_event(self, mask: int, fd: int) -> None:
        st = os.fstat(fd)
        path = self.dev_ino.get((st.st_dev, st.st_ino))
        if path is not None:
            self._file_event(path, mask)

    def _guarded(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except OSError as exc:
            self.note(f"reads of a watched file are no longer all seen: {exc.strerror or exc}")

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
        if mask & (FAN_OPEN_PERM | IN_OPEN):
            # An open, before any data: under fanotify it is held until this returns, so what an observer
            # puts beside the file here is there for every later open of the command.
            for obs in self.by_path.get(path, ()):
                if hasattr(obs, "on_open"):
                    obs.on_open(self.ws, self)
        if mask & IN_ACCESS:
            self.accessed.add(path)
        if mask & IN_CLOSE_NOWRITE and path in self.accessed:
            self.accessed.discard(path)
            for obs in self.by_path.get(path, ()):
                obs.on_read(self.ws, self, TRIGGER)

    # --- writing

    def put(self, items: list[tuple[str, bytes]]) -> bool:
        """Write each (workspace path, bytes) into the copy, all or none: False (and a note) if any path
        cannot be written safely, and then nothing visible has changed.

        A file already at the path is written in place (same inode), so every later open of it, by name
        or by a link the program made, sees the new bytes; except when its inode is a watched file's and
        the path is not that file's (a link the program made to it): then a new file replaces the name,
        so writing one path never changes another. A missing file is made beneath its folder."""
        plans: list[tuple[str, bytes, int, int, str | None]] = []  # path, data, dir fd, fd, temp name
        try:
            try:
                for path, data in items:
                    plans.append(self._plan(path, data))
                for _path, data, _dfd, fd, _tmp in plans:
                    if _tmp is not None:
                        os.pwrite(fd, data, 0)  # a new file no one sees yet
            except OSError as exc:
                for _path, _data, dfd, _fd, tmp in plans:
                    if tmp is not None:
                        with contextlib.suppress(OSError):
                            os.unlink(tmp, dir_fd=dfd)
                why = exc.strerror or str(exc)
                self.note(f"a file could not be written into the copy, so none was: {why}")
                return False
            for path, data, dfd, fd, tmp in plans:
                try:
                    if tmp is None:
                        # Written before truncating: a reader never finds the file empty.
                        os.pwrite(fd, data, 0)
                        os.ftruncate(fd, len(data))
                    else:
                        os.rename(tmp, _parts(path)[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
                    self.before[path] = data
                except OSError as exc:
                    self.note(f"{path!r} could not be written into the copy: {exc.strerror}")
            return True
        finally:
            for _path, _data, dfd, fd, _tmp in plans:
                os.close(fd)
                os.close(dfd)

    def _plan(self, path: str, data: bytes) -> tuple[str, bytes, int, int, str | None]:
        parts = _parts(path)
        dfd = self._dir(parts[:-1], create=True)
        assert dfd is not None
        try:
            got = self._leaf(dfd, parts[-1], path)
            if got is not None:
                pfd, st = got
                try:
                    key = (st.st_dev, st.st_ino)
                    if self.dev_ino.get(key, path) == path:
                        return path, data, dfd, self._rw(pfd, st), None
                finally:
                    os.close(pfd)
            # Made under a new name and renamed over the path: a rename never opens what it replaces.
            tmp = f".{os.urandom(6).hex()}.new"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(tmp, flags, 0o644, dir_fd=dfd)
            if self.owner is not None:
                os.fchown(fd, self.owner, self.owner)
            return path, data, dfd, fd, tmp
        except BaseException:
            os.close(dfd)
            raise

    def _close(self) -> None:
        # Closing the fanotify group lets any open still waiting on it through. The kernel's teardown of a
        # group waits for a grace period (milliseconds), so the call does not wait for it.
        fds = [fd for fd in (self.fan, self.fd, self.root_fd, *self.held.values()) if fd >= 0]
        self.fan = self.fd = self.root_fd = -1
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


def start(
    ws: Any, root: Path, before: dict[str, bytes], owner: int | None, notes: list[str]
) -> ReadWatch | None:
    """A ``ReadWatch`` when an observer of ``ws`` wants reads now; None (no inotify at all) otherwise, or
    when it cannot be set up (a line in ``notes`` says why: the command then runs unwatched)."""
    if not any(getattr(o, "watch_path", lambda: None)() is not None for o in ws.observers):
        return None
    try:
        return ReadWatch(ws, root, before, owner, notes)
    except OSError as exc:
        notes.append(f"[sandbox: reads of files were not watched in this command: {exc.strerror or exc}]")
        return None
