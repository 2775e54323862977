"""Which sandbox ``run_command`` uses, how it is started, and what it promises (``docs/threat-model.md``).

Import-light on purpose (standard library only): the workflow's pre-flight calls ``require_sandbox`` before
any job starts.

Backends:

- ``bwrap`` (strong): bubblewrap with every capability dropped, uid/gid 1000 in a new user namespace, new
  pid/net/ipc/uts/cgroup namespaces, an empty root holding only ``/usr``, the Python that runs programs, a
  few files of ``/etc`` and a synthetic passwd/group, a size-bounded private ``/tmp``, and the workspace
  copy at ``/workspace``.
- ``unshare`` (weak, only when named): no network, a private pid namespace, the same limits; the host
  filesystem stays visible with the permissions of the user the sandbox runs as.
- ``none``: no isolation; refused unless ``allow_unsandboxed``.

``auto`` means bubblewrap or a clear error, never a silent fallback.

When the audit runs as root the sandbox process runs as host uid/gid 65534 (nobody): host file permissions
then apply to programs and the kernel enforces RLIMIT_NPROC, which it never does for host root. Directories
the Python needs that nobody cannot traverse (a Python under ``/root``) are reached through a private mount
namespace in which the closed ancestor is replaced by a tmpfs holding just the needed bind (an exec chain:
``unshare --mount``, ``mount``, ``setpriv``; no Python runs between fork and exec).
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from evoaudit.errors import AuditError
from evoaudit.suite.apex.base.limits import Limits
from evoaudit.suite.apex.runtime.callgroup import CallGroup

if TYPE_CHECKING:
    from evoaudit.config import ApexConfig

Kind = Literal["bwrap", "unshare", "none"]
Isolation = Literal["strong", "weak", "none"]
ISOLATION: dict[str, Isolation] = {"bwrap": "strong", "unshare": "weak", "none": "none"}

# Fixed paths inside the sandbox, so that tool output does not depend on the machine.
INSIDE = {"workspace": "/workspace", "home": "/home/user", "lib": "/opt/workspace_api", "spool": "/spool"}
VENV_INSIDE = "/opt/venv"
SANDBOX_UID = 1000
HOST_DROP_ID = 65534  # nobody/nogroup: who the sandbox runs as on the host when the audit runs as root
# The environment is fixed, not inherited: a host's locale or time zone would change program output, and
# Python's per-process hash seed the order of a set a program prints (replay re-runs it and compares).
FIXED_ENV = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC", "PYTHONHASHSEED": "0"}
# What a Python/bash/ELF program needs from /etc: the loader cache and the alternatives symlinks that
# /usr/bin entries (awk, editor...) point through. Nothing else of the host's /etc is visible.
ETC_FILES = ("/etc/ld.so.cache", "/etc/alternatives")
PASSWD = f"user:x:{SANDBOX_UID}:{SANDBOX_UID}:user:{INSIDE['home']}:/bin/bash\n"
GROUP = f"user:x:{SANDBOX_UID}:\n"

BWRAP_FLAGS = (
    "--unshare-all",
    "--unshare-user",
    "--uid",
    str(SANDBOX_UID),
    "--gid",
    str(SANDBOX_UID),
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    # The command is the namespace's pid 1, so bwrap waits on it; its own pid-1 monitor otherwise outlives
    # bwrap by a moment and is left a zombie under the host's init (which, in containers, may never reap).
    "--as-pid-1",
    "--new-session",
    "--clearenv",
)
UNSHARE_FLAGS = ("-rn", "--pid", "--fork", "--kill-child", "--mount-proc")


class SandboxSettings(Protocol):
    """What ``sandbox_status`` reads: ``workspace.Settings`` or the config's ``suite.apex`` both have it."""

    sandbox: str
    allow_unsandboxed: bool


class SandboxUnavailableError(AuditError):
    """The configured sandbox cannot start on this machine."""


def settings_fields(apex_cfg: ApexConfig) -> dict[str, Any]:
    """The ``workspace.Settings`` fields the config's ``suite.apex`` sets for ``run_command``."""
    lim = apex_cfg.run_limits
    return {
        "sandbox": apex_cfg.sandbox,
        "allow_unsandboxed": apex_cfg.allow_unsandboxed,
        "timeout_seconds": lim.timeout_seconds,
        **asdict(Limits.of(apex_cfg)),
    }


@dataclass(frozen=True)
class SandboxInfo:
    """Which sandbox runs programs: recorded in ``run_manifest.json`` and each shard's provenance."""

    kind: Kind
    isolation: Isolation
    version: str | None
    flags: tuple[str, ...]
    host_uid: int
    requested: str
    available: bool
    reason: str = ""
    limits: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"flags": list(self.flags)}


def _sudo() -> str:
    return "" if os.geteuid() == 0 else "sudo "


def install_hint() -> str:
    return (
        f"install bubblewrap (`{_sudo()}apt-get install -y bubblewrap`), or set "
        "`suite.apex.sandbox: unshare` for weak isolation (no network, but the host filesystem stays "
        "readable; see docs/threat-model.md)"
    )


@functools.cache
def _version(kind: str) -> str | None:
    exe = shutil.which(kind)
    if kind == "none" or exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


@functools.cache
def probe(kind: str) -> tuple[bool, str]:
    """Whether this backend starts here (bubblewrap needs user namespaces, for one), and why not."""
    if kind == "none":
        return True, ""
    for exe in (kind, "prlimit"):
        if shutil.which(exe) is None:
            return False, f"`{exe}` is not installed"
    with tempfile.TemporaryDirectory(prefix="apex-probe-") as tmp:
        launch = Launch(kind, Limits(), Path(tmp))
        try:
            proc = subprocess.run(
                launch.argv(["/usr/bin/true"], {}, probe=True),
                capture_output=True,
                timeout=10,
                env={"PATH": "/usr/bin:/bin"},
                **launch.popen_kwargs(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"{kind} did not start: {exc}"
    if proc.returncode != 0:
        return False, f"{kind} did not start: {proc.stderr.decode(errors='replace').strip()[:300]}"
    return True, ""


def sandbox_works(kind: str) -> bool:
    return probe(kind)[0]


def sandbox_status(settings: SandboxSettings) -> SandboxInfo:
    """The sandbox the settings select on this machine; ``available`` False (with the reason) when it
    cannot start. Probes are cached per process, so repeated calls cost nothing."""
    requested = str(settings.sandbox)
    kind: Kind = "bwrap" if requested == "auto" else requested  # type: ignore[assignment]
    ok, reason = probe(kind)
    if kind == "none" and not settings.allow_unsandboxed:
        ok, reason = False, "sandbox 'none' needs suite.apex.allow_unsandboxed: true"
    flags = {"bwrap": BWRAP_FLAGS, "unshare": UNSHARE_FLAGS}.get(kind, ())
    return SandboxInfo(
        kind=kind,
        isolation=ISOLATION[kind],
        version=_version(kind),
        flags=tuple(flags),
        host_uid=HOST_DROP_ID if os.geteuid() == 0 and kind != "none" else os.geteuid(),
        requested=requested,
        available=ok,
        reason=reason,
        limits=asdict(Limits.of(settings)),
    )


def require_sandbox(settings: SandboxSettings) -> SandboxInfo:
    """``sandbox_status``, or an error saying how to get a sandbox on this machine."""
    info = sandbox_status(settings)
    if info.available:
        return info
    if info.kind == "none":
        raise SandboxUnavailableError(
            "suite.apex.sandbox: none runs workspace programs without any isolation; set "
            "suite.apex.allow_unsandboxed: true (trusted local runs only), or "
            + install_hint().replace("install", "better: install", 1)
        )
    raise SandboxUnavailableError(
        f"suite.apex.sandbox: {info.requested}: run_command needs {info.kind}, which does not work here "
        f"({info.reason}); {install_hint()}"
    )


# --- starting a sandboxed process -------------------------------------------------------------------------


def _reachable(path: str, uid: int) -> bool:
    """Whether ``uid`` (not root, no groups) can traverse every ancestor of ``path``."""
    p = Path(path)
    for d in [*reversed(p.parents), p]:
        try:
            st = os.stat(d)
        except OSError:
            return False
        bit = stat.S_IXUSR if st.st_uid == uid else stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True


def _closed_ancestor(path: str, uid: int) -> str | None:
    p = Path(path)
    for d in [*reversed(p.parents), p]:
        if not _reachable(str(d), uid):
            return str(d)
    return None


def python_dirs() -> dict[str, str]:
    """Host directory -> path inside: the venv at a fixed path (its tracebacks then name no host path),
    the base installation where the venv's ``home`` says it is."""
    out: dict[str, str] = {}
    if sys.prefix != sys.base_prefix:
        out[sys.prefix] = VENV_INSIDE
    if not sys.base_prefix.startswith("/usr"):
        out[sys.base_prefix] = sys.base_prefix
    return out


def python_inside() -> str:
    exe = Path(sys.executable)
    if sys.prefix != sys.base_prefix:
        return f"{VENV_INSIDE}/bin/{exe.name}"
    return str(exe)


class Launch:
    """How one backend starts a command: its argv (with the root drop to nobody) and Popen arguments."""

    def __init__(self, kind: str, limits: Limits, run_dir: Path) -> None:
        self.kind, self.limits, self.run_dir = kind, limits, run_dir
        self.as_root = os.geteuid() == 0 and kind != "none"
        # Host paths nobody cannot reach: their closed ancestor gets a tmpfs holding just the bind.
        self.patches: list[tuple[str, str]] = []
        if self.as_root:
            for src in python_dirs():
                top = _closed_ancestor(src, HOST_DROP_ID)
                if top is not None:
                    self.patches.append((top, src))
        self.group: CallGroup | None = None

    def bound_call(self) -> None:
        """Put the whole call (every process it starts) in a control group bounding its memory and its
        number of processes, where the machine allows one (``callgroup.py``); ``close`` ends it."""
        if self.kind != "none":
            self.group = CallGroup.create(self.limits.memory_mb << 20, self.limits.max_processes)

    def close(self) -> None:
        """Kill whatever of the call is left in its control group and remove the group."""
        if self.group is not None:
            self.group.close()
            self.group = None

    def _joins(self) -> list[str]:
        return [f"echo $$ > {shlex.quote(p)}" for p in self.group.procs] if self.group else []

    def popen_kwargs(self) -> dict[str, Any]:
        """How Popen drops to nobody when no mount patch is needed: ``user``/``group`` are applied by the
        C fork-exec path, which is safe in a parent with threads (a Python pre-exec function is not)."""
        if not self.as_root or self.patches or self.group:
            return {}
        return {"user": HOST_DROP_ID, "group": HOST_DROP_ID, "extra_groups": []}

    def _root_chain(self, argv: list[str]) -> list[str]:
        """As root with a Python nobody cannot reach or a control group to join (joined first): a private
        mount namespace (util-linux ``unshare``) in which each closed ancestor is covered by a small tmpfs
        holding only the Python's bind, then ``setpriv`` drops to nobody and runs ``argv``. Every bind is
        staged under the run directory before any tmpfs is mounted, since a tmpfs hides the sources under
        it (a venv and its Python both under ``/root`` share one). The host's own mounts are never
        changed."""
        q = shlex.quote
        lines = ["set -e", *self._joins()]
        stages = [self.run_dir / f"stage{i}" for i in range(len(self.patches))]
        for stage, (_, src) in zip(stages, self.patches, strict=True):
            lines += [f"mkdir -p {q(str(stage))}", f"mount --rbind {q(src)} {q(str(stage))}"]
        for top in dict.fromkeys(top for top, _ in self.patches):
            lines.append(f"mount -t tmpfs -o mode=755,size=64k tmpfs {q(top)}")
        for stage, (_, src) in zip(stages, self.patches, strict=True):
            lines += [f"mkdir -p {q(src)}", f"mount --rbind {q(str(stage))} {q(src)}"]
        drop = f"--reuid={HOST_DROP_ID} --regid={HOST_DROP_ID} --clear-groups"
        lines.append(f'exec /usr/bin/setpriv {drop} -- "$@"')
        script = "\n".join(lines)
        chain = ["/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script]
        return [*chain, "sh", *argv]

    def prlimit(self) -> list[str]:
        lim = self.limits
        return [
            "/usr/bin/prlimit",
            f"--cpu={lim.cpu_seconds}",
            f"--as={lim.memory_mb * 1024 * 1024}",
            f"--nproc={lim.max_processes}",
            f"--fsize={lim.file_size_mb * 1024 * 1024}",
            "--core=0",
            "--",
        ]

    def argv(self, command: list[str], env: dict[str, str], *, probe: bool = False) -> list[str]:
        argv = self._argv(command, env, probe=probe)
        if self.as_root and (self.patches or self.group):
            return self._root_chain(argv)
        if self.group:  # joined by the first process, before anything of the call can fork
            return ["/bin/sh", "-c", "\n".join(["set -e", *self._joins(), 'exec "$@"']), "sh", *argv]
        return argv

    def _argv(self, command: list[str], env: dict[str, str], *, probe: bool = False) -> list[str]:
        inner = [*self.prlimit(), *command]
        if self.kind == "none":
            return inner
        if self.kind == "unshare":
            return ["unshare", *UNSHARE_FLAGS, "--", *inner]
        args = ["bwrap", *BWRAP_FLAGS, "--ro-bind", "/usr", "/usr"]
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
        for f in ETC_FILES:
            if os.path.exists(f):
                args += ["--ro-bind", f, f]
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            # --dev's own /dev/shm is a tmpfs of half the RAM, writable, and --remount-ro / misses it:
            # bounded like /tmp, and /dev itself read-only (its device nodes stay writable).
            "--size",
            str(self.limits.tmp_mb << 20),
            "--tmpfs",
            "/dev/shm",
            "--remount-ro",
            "/dev",
            "--size",
            str(self.limits.tmp_mb << 20),
            "--tmpfs",
            "/tmp",
        ]
        for src, dst in python_dirs().items():
            args += ["--ro-bind", src, dst]
        if not probe:
            d = self.run_dir
            args += [
                "--ro-bind",
                str(d / "etc/passwd"),
                "/etc/passwd",
                "--ro-bind",
                str(d / "etc/group"),
                "/etc/group",
            ]
            args += [
                "--bind",
                str(d / "workspace"),
                INSIDE["workspace"],
                "--bind",
                str(d / "home"),
                INSIDE["home"],
            ]
            args += ["--ro-bind", str(d / "lib"), INSIDE["lib"], "--bind", str(d / "spool"), INSIDE["spool"]]
            args += ["--chdir", INSIDE["workspace"]]
        for k, v in env.items():
            args += ["--setenv", k, v]
        # bubblewrap's root is a tmpfs (unbounded, writable): read-only once everything is mounted on it.
        return [*args, "--remount-ro", "/", "--", *inner]


def available_sandbox() -> str:
    """'bwrap', 'unshare' or 'none': the strongest isolation that works on this machine."""
    return next(k for k in ("bwrap", "unshare", "none") if sandbox_works(k))
