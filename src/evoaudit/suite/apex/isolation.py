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
namespace in which the closed ancestor is replaced by a tmpfs holding just the needed bind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from evoaudit.errors import AuditError

Kind = Literal["bwrap", "unshare", "none"]
Isolation = Literal["strong", "weak", "none"]
ISOLATION: dict[str, Isolation] = {"bwrap": "strong", "unshare": "weak", "none": "none"}

# Fixed paths inside the sandbox, so that tool output does not depend on the machine.
INSIDE = {"workspace": "/workspace", "home": "/home/user", "lib": "/opt/workspace_api", "spool": "/spool"}
VENV_INSIDE = "/opt/venv"
SANDBOX_UID = 1000
HOST_DROP_ID = 65534  # nobody/nogroup: who the sandbox runs as on the host when the audit runs as root
# The environment is fixed, not inherited: a host's locale or time zone would change program output.
FIXED_ENV = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC"}
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


@dataclass(frozen=True)
class Limits:
    """Per-call resource limits, set with ``prlimit`` inside the sandbox before the command runs."""

    cpu_seconds: int = 20
    memory_mb: int = 1024
    max_processes: int = 64
    file_size_mb: int = 64
    output_kb: int = 1024
    tmp_mb: int = 64

    @classmethod
    def of(cls, s: Any) -> Limits:
        """From ``workspace.Settings`` or the config's ``suite.apex`` (whose limits are in ``run_limits``)."""
        src = getattr(s, "run_limits", s)
        return cls(**{k: int(getattr(src, k, v)) for k, v in asdict(cls()).items()})


def settings_fields(apex_cfg: Any) -> dict[str, Any]:
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
    launch = Launch(kind, Limits(), Path("/nonexistent"))
    try:
        proc = subprocess.run(
            launch.argv(["/usr/bin/true"], {}, probe=True),
            capture_output=True,
            timeout=10,
            preexec_fn=launch.preexec,  # noqa: PLW1509 (the child is a fresh exec of the sandbox)
            env={"PATH": "/usr/bin:/bin"},
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


class _Libc:
    """The three syscalls the root pre-exec step needs, resolved before fork."""

    CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 4096, 16384, 1 << 18

    def __init__(self) -> None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.unshare, self.mount = lib.unshare, lib.mount
        self.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]


@functools.cache
def _libc() -> _Libc:
    return _Libc()


class Launch:
    """How one backend starts a command: argv, environment and the pre-exec step."""

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
            _libc()

    def preexec(self) -> None:
        if not self.as_root:
            return
        if self.patches:
            lc = _libc()
            # A private mount namespace for this child only: the host's mounts are never touched.
            if lc.unshare(lc.CLONE_NEWNS) != 0 or lc.mount(
                b"none", b"/", None, lc.MS_REC | lc.MS_PRIVATE, None
            ):
                raise OSError(ctypes.get_errno(), "private mount namespace")
            hidden: dict[str, int] = {}
            for top, src in self.patches:
                if top not in hidden:
                    hidden[top] = os.open(src, os.O_PATH | os.O_DIRECTORY)
            done: set[str] = set()
            for top, src in self.patches:
                fd = hidden[top]
                if top not in done:
                    if lc.mount(b"tmpfs", top.encode(), b"tmpfs", 0, b"mode=755,size=64k"):
                        raise OSError(ctypes.get_errno(), f"tmpfs over {top}")
                    done.add(top)
                os.makedirs(src, exist_ok=True)
                if lc.mount(f"/proc/self/fd/{fd}".encode(), src.encode(), None, lc.MS_BIND | lc.MS_REC, None):
                    raise OSError(ctypes.get_errno(), f"bind {src}")
        os.setgroups([])
        os.setgid(HOST_DROP_ID)
        os.setuid(HOST_DROP_ID)

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
