"""``run_command``: code execution over a temporary copy of the workspace, isolated by ``isolation.py``.

The copy is always at ``/workspace`` as the program sees it (bubblewrap binds it there; with the weak
``unshare`` backend the real path is rewritten to ``/workspace`` in the output), so the text a call returns
does not depend on the machine or on the temporary directory's name. Output is read while the program
runs and the program is killed once it passes ``run_limits.output_kb``; the whole process tree ends with
the call. Programs reach the apps only through ``workspace_api``: it appends requests to a spool file, which
the parent applies afterwards through the same tool functions, tagged ``program:<command>`` (at most
``MAX_SPOOL_REQUESTS`` per call; a request holding text that is not valid UTF-8 is skipped). File changes in
the copy are written back the same way: regular files only (no symlinks, no hard links, nothing over the
file-size limit, no sparse files); anything else keeps its previous workspace content, with a note in the
output saying why. The changes applied are returned with the text (the loop records them on the call,
``records.FileEffect``); replay may choose the bytes written (``Workspace.copy_back_bytes``). As root the
run directory is a size-bounded tmpfs and the call runs in a control group of its own (``callgroup.py``);
the directory's removal never fails on what a program left in it (``rundir.py``), so a call's effects,
once applied, are always the agent's (``docs/threat-model.md``).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import selectors
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evoaudit.suite.apex.base.filetext import ToolError, shared_out, unencodable
from evoaudit.suite.apex.base.limits import Limits
from evoaudit.suite.apex.base.workspace import FileChange, Outbound, Workspace, norm_path
from evoaudit.suite.apex.runtime import isolation, readwatch, rundir
from evoaudit.suite.apex.runtime.isolation import INSIDE

log = logging.getLogger(__name__)

# The tool layer's entry (``tools.call_tool``): (workspace, tool, arguments, actor) -> (text, error).
CallTool = Callable[[Workspace, str, dict[str, Any], str], tuple[str, str | None]]

# The module a program imports to act on the apps; standalone (it must run inside the sandbox).
WORKSPACE_API = '''"""Workspace API for programs: requests go to a spool, applied after the run."""
import json as _json
import os as _os

_SPOOL = _os.environ["WORKSPACE_SPOOL"]


def call(tool, **args):
    with open(_SPOOL, "a", encoding="utf-8") as fh:
        fh.write(_json.dumps({"tool": tool, "args": args}) + "\\n")


def send_mail(to, subject, body, cc=None):
    to = [to] if isinstance(to, str) else list(to)
    call("send_mail", to=to, subject=subject, body=body, cc=cc or [])


def post_message(channel, text):
    call("post_message", channel=channel, text=text)


def create_event(title, start, end, attendees=None, description=""):
    attendees = attendees or []
    call("create_event", title=title, start=start, end=end, attendees=attendees, description=description)


def share_file(path, with_email):
    call("share_file", path=path, with_email=with_email)


def http_post(url, data):
    """The workspace's only way out: recorded by the outbound collector, never sent anywhere."""
    call("__outbound__", url=url, data=str(data))
'''

MAX_FILES = 10_000  # entries walked when copying back; more is a note, not a hang
# workspace_api requests applied per run_command: each is a recorded tool call, so a program writing
# hundreds of thousands would take the parent hours and fill the record; the rest are skipped with a note.
MAX_SPOOL_REQUESTS = 1_000


class _Notes(list):
    def add(self, path: str, why: str) -> None:
        self.append(f"[not copied back: {path!r}: {why}]")


def _chown_tree(root: Path, uid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        os.chown(dirpath, uid, uid)
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)


def _materialise(ws: Workspace, root: Path, notes: _Notes) -> tuple[dict[str, bytes], set[str]]:
    """Write the workspace into ``root``; a path that cannot be written stays out (and keeps its content)."""
    before: dict[str, bytes] = {}
    skipped: set[str] = set()
    base = os.path.realpath(root)
    for path, entry in ws.files.items():
        target = os.path.normpath(os.path.join(base, path))
        if os.path.commonpath([base, target]) != base or target == base:
            notes.add(path, "outside the workspace")
            skipped.add(path)
            continue
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            # O_EXCL|O_NOFOLLOW: nothing already there (a link, a folder) is written through.
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            notes.add(path, f"cannot be placed in the sandbox ({exc.strerror})")
            skipped.add(path)
            continue
        with os.fdopen(fd, "wb") as fh:
            fh.write(entry.data)
        if entry.kind == "bin" or entry.data[:4] == b"\x7fELF":  # executables keep their mode
            os.chmod(target, 0o755)
        before[path] = entry.data
    return before, skipped


def _collect(
    root: Path, lim: Limits, notes: _Notes, before: dict[str, bytes]
) -> tuple[dict[str, bytes], set[str]]:
    """The regular files a program left in ``root``, read without following links and within the caps.
    Returns them and the paths that were seen but not read (they keep their previous content). Once the
    entry cap is hit, every path of ``before`` the walk did not reach is among the latter: not seeing a
    file is not seeing it deleted."""
    cap = lim.file_size_mb << 20
    budget = 4 * cap  # total bytes read back per call: the parent's memory stays bounded
    out: dict[str, bytes] = {}
    skipped: set[str] = set()
    seen = 0
    visited: set[str] = set()
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(root, rel_dir)), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            seen += 1
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            if seen > MAX_FILES:
                notes.add(rel, f"more than {MAX_FILES} entries")
                skipped.add(rel)
                skipped.update(p for p in before if p not in out and p not in visited)
                stack.clear()
                break
            visited.add(rel)
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel)
                continue
            why = _unreadable(st, cap, budget)
            if why is None and "\\" in rel:
                why = "a backslash in its name (workspace paths read it as '/')"
            if why is None:
                data = _read_regular(os.path.join(root, rel), st)
                why = "changed while being read" if data is None else None
            if why is not None:
                notes.add(rel, why)
                skipped.add(rel)
                continue
            budget -= len(data)
            out[rel] = data
    return out, skipped


def _unreadable(st: os.stat_result, cap: int, budget: int) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink > 1:
        return "a hard link"
    if st.st_size > cap:
        return f"over the file-size limit ({st.st_size} bytes)"
    if st.st_size > budget:
        return "over the per-call copy-back limit"
    if st.st_blocks * 512 + 65536 < st.st_size:
        return "a sparse file"
    return None


def _read_regular(path: str, st: os.stat_result) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        now = os.fstat(fd)
        if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(now.st_mode):
            return None
        data = fh.read(st.st_size + 1)
    return data if len(data) == st.st_size else None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    launch: isolation.Launch,
    timeout: float,
    cap: int,
    watch: readwatch.ReadWatch | None = None,
):
    """Run ``argv`` in its own session, reading stdout and stderr as they come (and ``watch``'s events,
    so an observer acts while the program still runs); kill the session when the time or the output cap
    runs out. Returns (stdout, stderr, status)."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
        **launch.popen_kwargs(),
    )
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    sel = selectors.DefaultSelector()
    for fd in bufs:
        sel.register(fd, selectors.EVENT_READ)
    for fd in watch.filenos() if watch is not None else ():
        sel.register(fd, selectors.EVENT_READ, watch)
    open_pipes = set(bufs)
    deadline = time.monotonic() + timeout
    status, total, exited_at = None, 0, None
    try:
        while open_pipes:
            now = time.monotonic()
            if now >= deadline:
                status = f"killed after {int(timeout)} s"
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 0.5:
                break  # only a process that escaped the sandbox's tree still holds the pipes
            for key, _ in sel.select(min(deadline - now, 0.1)):
                if key.data is not None:
                    key.data.pump()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    open_pipes.discard(key.fd)
                    continue
                room = cap - total
                bufs[key.fd] += chunk[:room]
                total += min(len(chunk), room)
                if len(chunk) > room:
                    status = f"killed: output over {cap} bytes"
                    break
            if status:
                break
    finally:
        _kill_group(proc)
        sel.close()
        code = proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    out, err = bufs.values()
    return bytes(out), bytes(err), status or f"exit code {code}"


def _rewrite(text: str, real: dict[str, str]) -> str:
    # Longest first: a run directory's subpaths before the directory itself.
    for host, inside in sorted(real.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(host, inside)
    return text


@functools.cache
def _sweep_once() -> None:
    """Once per process: what a killed audit left mounted (``rundir.sweep_stale``)."""
    for path in rundir.sweep_stale():
        log.warning("run_command: removed the run directory %s of a process that no longer exists", path)


def run_in_sandbox(
    ws: Workspace, command: str, call_tool: CallTool, timeout: int = 30
) -> tuple[str, tuple[FileChange, ...]]:
    """Run ``command`` over a copy of ``ws``; the program's app calls go through ``call_tool`` (the tool
    layer's ``tools.call_tool``, passed in so that this module does not import the tools). Returns the
    text the caller sees and the file changes copied back (``FileChange``, in the order applied)."""
    s = ws.settings
    info = isolation.sandbox_status(s)
    if not info.available:
        try:
            isolation.require_sandbox(s)
        except isolation.SandboxUnavailableError as exc:
            raise ToolError(f"run_command is unavailable: {exc}") from None
    kind, lim = info.kind, Limits.of(s)
    timeout = max(1, min(int(timeout), int(s.timeout_seconds)))
    notes = _Notes()
    _sweep_once()
    run_dir = Path(tempfile.mkdtemp(prefix="apex-run-"))
    # The call's disk: the workspace copy plus what may be copied back (``_collect``'s budget), on a tmpfs.
    size = sum(len(f.data) for f in ws.files.values()) + 4 * (lim.file_size_mb << 20) + (16 << 20)
    bounded = rundir.mount_bounded(run_dir, size)
    try:
        out, status, applied = _call(ws, command, call_tool, run_dir, kind, lim, timeout, notes)
    finally:
        # Whatever the program left (a tree deeper than any recursion, folders of mode 000, any name) is
        # removed without raising: the call's effects, already applied, stay the agent's.
        if bounded:
            rundir.unmount(run_dir)
        left = rundir.remove_run_dir(str(run_dir))
        if left is not None:
            log.warning("run_command: %s", left)
    limit = ws.settings.page_chars
    out = out if len(out) <= limit else out[:limit] + f"\n[... {len(out) - limit} more characters]"
    tail = ("\n" + "\n".join(notes)) if notes else ""
    return f"[{status}]\n{out}{tail}", applied


def _call(
    ws: Workspace,
    command: str,
    call_tool: CallTool,
    run_dir: Path,
    kind: isolation.Kind,
    lim: Limits,
    timeout: int,
    notes: _Notes,
) -> tuple[str, str, tuple[FileChange, ...]]:
    """One call in ``run_dir``: materialise, run, copy back, apply the spool. Returns (output, status, the
    file changes the copy-back applied).

    Long on purpose: the steps share the run directory in order; apart, each would pass it all back."""
    for d in ("workspace", "home", "lib", "spool", "etc"):
        (run_dir / d).mkdir()
    (run_dir / "lib" / "workspace_api.py").write_text(WORKSPACE_API)
    (run_dir / "etc" / "passwd").write_text(isolation.PASSWD)
    (run_dir / "etc" / "group").write_text(isolation.GROUP)
    work, spool = run_dir / "workspace", run_dir / "spool"
    before, skipped = _materialise(ws, work, notes)
    launch = isolation.Launch(kind, lim, run_dir)
    launch.bound_call()
    if launch.as_root:
        # The sandbox runs as nobody on the host: it owns its writable directories, nothing else.
        os.chown(run_dir, isolation.HOST_DROP_ID, isolation.HOST_DROP_ID)
        for d in ("workspace", "home", "spool"):
            _chown_tree(run_dir / d, isolation.HOST_DROP_ID)
    # Set up before the program starts, so its first read is seen; None when no observer wants reads.
    watch = readwatch.start(ws, work, before, isolation.HOST_DROP_ID if launch.as_root else None, notes)
    if kind == "bwrap":
        where = {k: v for k, v in INSIDE.items()}
        python_bin = str(Path(isolation.python_inside()).parent)
    else:
        where = {k: str(run_dir / k) for k in INSIDE}
        python_bin = str(Path(sys.executable).parent)
    env = dict(isolation.FIXED_ENV) | {
        "HOME": where["home"],
        "PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": where["lib"],
        "PYTHONDONTWRITEBYTECODE": "1",
        "WORKSPACE_SPOOL": where["spool"] + "/requests.jsonl",
    }
    script = ["/bin/bash", "-c", command]
    if kind == "bwrap":
        argv, run_env = launch.argv(script, env), {"PATH": "/usr/bin:/bin"}
    else:
        argv, run_env = launch.argv(script, {}), env
    try:
        out_b, err_b, status = _run(argv, run_env, work, launch, timeout, lim.output_kb * 1024, watch)
    finally:
        launch.close()
        if watch is not None:
            watch.finish()
    out = out_b.decode("utf-8", "replace") + err_b.decode("utf-8", "replace")
    if kind != "bwrap":
        real = {str(run_dir / k): INSIDE[k] for k in INSIDE} | {os.path.realpath(work): INSIDE["workspace"]}
        if sys.prefix != sys.base_prefix:
            real[sys.prefix] = isolation.VENV_INSIDE
        out = _rewrite(out, real)
    program = f"program:{command[:200]}"
    after, unread = _collect(work, lim, notes, before)
    skipped |= unread
    changed = [p for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p)]
    applied: list[FileChange] = []
    # Deletions first: a folder a program replaced by a file (or the reverse) then never clashes.
    for path in sorted(changed, key=lambda p: p in after):
        if path in skipped:
            continue
        try:
            key = norm_path(path)
            if path in after:
                data = after[path] if ws.copy_back_bytes is None else ws.copy_back_bytes(key, after[path])
                entry = ws.put_file(key, data)
                applied.append(FileChange(key, data))
                # A program's write to a file shared outside the firm leaves it too (tools.shared_out).
                shared_out(ws, entry, program)
            elif ws.files.pop(key, None) is not None:
                applied.append(FileChange(key, None))
        except (ValueError, ToolError) as exc:
            notes.add(path, str(exc))
    requests = _spool_lines(spool / "requests.jsonl", lim, notes)
    if len(requests) > MAX_SPOOL_REQUESTS:
        notes.append(
            f"[workspace_api: {len(requests) - MAX_SPOOL_REQUESTS} requests after the first "
            f"{MAX_SPOOL_REQUESTS} were not applied]"
        )
    not_utf8 = 0
    for line in requests[:MAX_SPOOL_REQUESTS]:
        try:
            req = json.loads(line)
            tool, args = str(req["tool"]), dict(req["args"])
        except (ValueError, KeyError, TypeError):
            continue
        if unencodable(req) is not None:
            # Neither a tool nor the record could hold it (a lone surrogate from a "\\ud800" escape).
            not_utf8 += 1
            continue
        if tool == "__outbound__":
            ws.outbound.append(
                Outbound("http", str(args.get("url")), str(args.get("data")), ws.clock.tick, program)
            )
        elif tool not in ("run_command", "submit_answer"):
            call_tool(ws, tool, args, program)
    if not_utf8:
        notes.append(f"[workspace_api: {not_utf8} request(s) skipped: their text is not valid UTF-8]")
    return out, status, tuple(applied)


def _spool_lines(path: Path, lim: Limits, notes: _Notes) -> list[str]:
    try:
        st = os.lstat(path)
    except OSError:
        return []
    why = _unreadable(st, lim.file_size_mb << 20, lim.file_size_mb << 20)
    data = _read_regular(str(path), st) if why is None else None
    if data is None:
        notes.add("workspace_api spool", why or "changed while being read")
        return []
    return data.decode("utf-8", "replace").splitlines()
