"""A run directory's removal that cannot fail on what a program left in it (``docs/threat-model.md``).

``shutil.rmtree`` recurses once per level (a tree ~1,000 levels deep raises RecursionError), resolves paths
from the top (a deep enough one is over PATH_MAX) and stops at a folder whose mode denies its owner. Here
the walk is iterative and relative to an open descriptor of the folder it is in (one descriptor at a time,
``..`` to climb back), every folder is given back its owner's permissions before it is read, and any name
is removed as it is, byte for byte. Whatever still stands after that is handed to ``rm -rf`` in a child
process (after ``chmod -R u+rwx``), and what even that leaves is reported, never raised.

As root the run directory is first made a size-bounded tmpfs (``mount_bounded``), so what a call writes
(the workspace copy, home, spool) is bounded in bytes and never reaches the host's disk; it is unmounted
(lazily, so a process still holding it cannot keep it) before the removal.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, dir_fd: int | None) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        # A folder whose mode denies its owner (chmod 000): the owner (or root) may give it back.
        os.chmod(name, stat.S_IRWXU, dir_fd=dir_fd, follow_symlinks=True)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _remove_iteratively(path: str) -> None:
    """Remove the tree at ``path`` without recursion and without long paths; OSError when something stays."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    fd = _open_dir(path, None)
    names: list[str] = []  # the folders descended into, below ``path``
    try:
        while True:
            try:
                os.fchmod(fd, stat.S_IRWXU)
            except OSError:
                pass
            subdir = None
            with os.scandir(fd) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        subdir = subdir or entry.name
                    else:
                        os.unlink(entry.name, dir_fd=fd)
            if subdir is not None:
                child = _open_dir(subdir, fd)
                os.close(fd)
                fd = child
                names.append(subdir)
                continue
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


def remove_run_dir(path: str) -> str | None:
    """Remove ``path`` and everything under it; None once it is gone, else why it could not be (never
    raises: what a program left behind is not a failure of the run)."""
    first = None
    try:
        _remove_iteratively(path)
        return None
    except (OSError, RecursionError, ValueError) as exc:
        first = f"{type(exc).__name__}: {exc}"
    # Last resort, outside this process: coreutils walk iteratively too, and a crash there is theirs.
    for argv in (["chmod", "-R", "u+rwx", "--", path], ["rm", "-rf", "--one-file-system", "--", path]):
        exe = shutil.which(argv[0])
        if exe is None:
            continue
        try:
            subprocess.run([exe, *argv[1:]], capture_output=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired):
            pass
    if not os.path.lexists(path):
        return None
    return f"{path} could not be removed ({first})"


SOURCE = "evoaudit-run-"  # a run directory's tmpfs is named for the process that mounted it


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Unmount and remove the run directories of processes that died mid-call (``kill -9``): their tmpfs
    would otherwise hold memory until reboot. Only mounts named for a process that no longer exists are
    touched, so concurrent audits keep theirs. Returns the directories swept (never raises)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    swept = []
    for line in lines:
        source, target = line.split()[:2]
        pid = source.removeprefix(SOURCE)
        if source.startswith(SOURCE) and pid.isdigit() and not _alive(int(pid)):
            target = target.replace("\\040", " ")
            unmount(Path(target))
            remove_run_dir(target)
            swept.append(target)
    return swept


def mount_bounded(path: Path, size_bytes: int) -> bool:
    """Mount a tmpfs of ``size_bytes`` on the empty directory ``path`` (root only); whether it was."""
    exe = shutil.which("mount")
    if os.geteuid() != 0 or exe is None:
        return False
    opts = f"size={max(size_bytes, 1 << 20)},mode=700,nodev,nosuid"
    try:
        proc = subprocess.run(
            [exe, "-t", "tmpfs", "-o", opts, f"{SOURCE}{os.getpid()}", str(path)],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def unmount(path: Path) -> None:
    """Lazily unmount what ``mount_bounded`` mounted (never raises)."""
    exe = shutil.which("umount")
    if exe is None:
        return
    try:
        subprocess.run([exe, "-l", str(path)], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        pass
