"""``run_command``: code execution over a temporary copy of the workspace, with no network.

bubblewrap where it works (new namespaces, read-only system directories, the copy bound at /workspace, a
fake HOME, a cleared environment), otherwise ``unshare -rn`` (no network, but the host filesystem is
visible); without either the tool refuses unless ``suite.apex.allow_unsandboxed`` is set. CPU and memory are
capped with ``ulimit``, wall time with a timeout. Programs reach the apps only through ``workspace_api``: it
appends requests to a spool file, which the parent applies afterwards through the same tool functions, tagged
``program:<command>``. File changes in the copy are written back the same way.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from evoaudit.suite.apex.workspace import Workspace, norm_path

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

ENV_ALLOW = ("LANG", "LC_ALL", "TZ")
_SYSTEM_DIRS = ("/usr", "/etc")


def _probe(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@cache
def sandbox_works(kind: str) -> bool:
    """Whether this isolation actually starts here (bubblewrap needs user namespaces, for one)."""
    if kind == "bwrap":
        return bool(shutil.which("bwrap")) and _probe(
            ["bwrap", "--unshare-all", *_bwrap_binds(), "--", "/usr/bin/true"]
        )
    if kind == "unshare":
        return bool(shutil.which("unshare")) and _probe(["unshare", "-rn", "/usr/bin/true"])
    return kind == "none"


def available_sandbox() -> str:
    """'bwrap', 'unshare' or 'none': the strongest isolation that works on this machine."""
    return next(k for k in ("bwrap", "unshare", "none") if sandbox_works(k))


def _bwrap_binds() -> list[str]:
    args: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for link, target in (
        ("/bin", "usr/bin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
        ("/sbin", "usr/sbin"),
    ):
        if os.path.islink(link):
            args += ["--symlink", target, link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    # The Python that runs programs (and its installed packages, e.g. openpyxl), read-only. Bound after
    # the /tmp tmpfs, which would otherwise hide a virtual environment that lives under /tmp.
    for prefix in sorted({sys.prefix, sys.base_prefix}):
        if not prefix.startswith("/usr"):
            args += ["--ro-bind", prefix, prefix]
    return args


def _materialise(ws: Workspace, root: Path) -> dict[str, bytes]:
    before = {}
    for path, entry in ws.files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(entry.data)
        if entry.kind == "bin" or entry.data[:4] == b"\x7fELF":  # executables keep their mode
            target.chmod(0o755)
        before[path] = entry.data
    return before


def _collect(root: Path) -> dict[str, bytes]:
    # Symlinks are not copied back: read by the parent, one could point outside the sandbox.
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def run_in_sandbox(ws: Workspace, command: str, timeout: int = 30) -> str:
    from evoaudit.suite.apex.tools import ToolError, call_tool
    from evoaudit.suite.apex.workspace import Outbound

    s = ws.settings
    kind = available_sandbox() if s.sandbox == "auto" else s.sandbox
    if kind == "none" and not s.allow_unsandboxed:
        raise ToolError(
            "run_command is unavailable: no sandbox (bubblewrap or unshare) works here; install "
            "bubblewrap or set "
            "suite.apex.allow_unsandboxed: true"
        )
    timeout = max(1, min(int(timeout), int(s.timeout_seconds)))
    with tempfile.TemporaryDirectory(prefix="apex-run-") as tmp:
        tmp_p = Path(tmp)
        work, home, lib, spool = tmp_p / "workspace", tmp_p / "home", tmp_p / "lib", tmp_p / "spool"
        for d in (work, home, lib, spool):
            d.mkdir()
        (lib / "workspace_api.py").write_text(WORKSPACE_API)
        before = _materialise(ws, work)
        inside = {
            "workspace": "/workspace",
            "home": "/home/user",
            "lib": "/opt/workspace_api",
            "spool": "/spool",
        }
        if kind != "bwrap":
            inside = {"workspace": str(work), "home": str(home), "lib": str(lib), "spool": str(spool)}
        env = {k: os.environ[k] for k in ENV_ALLOW if k in os.environ}
        env |= {
            "HOME": inside["home"],
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "PYTHONPATH": inside["lib"],
            "PYTHONDONTWRITEBYTECODE": "1",
            "WORKSPACE_SPOOL": inside["spool"] + "/requests.jsonl",
        }
        limits = f"ulimit -t {int(s.cpu_seconds)}; ulimit -v {int(s.memory_mb) * 1024}; "
        script = ["/bin/bash", "-c", limits + "cd " + shlex.quote(inside["workspace"]) + " && " + command]
        if kind == "bwrap":
            argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", *_bwrap_binds()]
            argv += ["--bind", str(work), inside["workspace"], "--bind", str(home), inside["home"]]
            argv += [
                "--ro-bind",
                str(lib),
                inside["lib"],
                "--bind",
                str(spool),
                inside["spool"],
                "--clearenv",
            ]
            for k, v in env.items():
                argv += ["--setenv", k, v]
            argv += ["--chdir", inside["workspace"], "--", *script]
            run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        elif kind == "unshare":
            argv, run_env = ["unshare", "-rn", *script], env
        else:
            argv, run_env = script, env
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout, env=run_env, cwd=work)
            out = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
            status = f"exit code {proc.returncode}"
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode("utf-8", "replace") + (exc.stderr or b"").decode(
                "utf-8", "replace"
            )
            status = f"killed after {timeout} s"
        program = f"program:{command[:200]}"
        after = _collect(work)
        for path in sorted(set(before) | set(after)):
            if before.get(path) != after.get(path):
                try:
                    key = norm_path(path)
                except ValueError:
                    continue
                if path in after:
                    ws.put_file(key, after[path])
                else:
                    ws.files.pop(key, None)
        requests = spool / "requests.jsonl"
        if requests.exists():
            for line in requests.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    req = json.loads(line)
                    tool, args = str(req["tool"]), dict(req["args"])
                except (ValueError, KeyError, TypeError):
                    continue
                if tool == "__outbound__":
                    ws.outbound.append(
                        Outbound("http", str(args.get("url")), str(args.get("data")), ws.clock.tick, program)
                    )
                elif tool not in ("run_command", "submit_answer"):
                    call_tool(ws, tool, args, actor=program)
    limit = ws.settings.page_chars
    out = out if len(out) <= limit else out[:limit] + f"\n[... {len(out) - limit} more characters]"
    return f"[{status}; sandbox: {kind}]\n{out}"
