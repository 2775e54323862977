"""Bounds over all the processes of one ``run_command`` call: a control group per call.

Resource limits (``prlimit``) bound each process: six processes of 900 MB each stay under a 1 GB
RLIMIT_AS one by one, and RLIMIT_NPROC counts every process of the host user the sandbox runs as, across
concurrent calls. A control group bounds the call as a whole: its memory (every process, and the pages of
its tmpfs mounts, are charged to it; past the bound the kernel's OOM killer ends a process of the call)
and its number of processes, and it names every process left at the end, which are killed.

Used where the machine lets the audit create one: cgroup v2 with the ``memory`` and ``pids`` controllers
enabled below the audit's own group, or cgroup v1's ``memory`` and ``pids`` hierarchies, writable by the
audit (as root). Elsewhere the per-process limits stay the bound (``docs/threat-model.md``).
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path

_COUNTER = itertools.count()
CGROUP_ROOT = Path("/sys/fs/cgroup")  # where cgroup v2 is mounted, or v1's hierarchies are
_V1 = ("memory", "pids")


def _own_path(hierarchy: str) -> str:
    """This process's group in a v1 hierarchy ("" for v2's unified line), from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, names, path = line.split(":", 2)
        if (hierarchy == "" and names == "") or hierarchy in names.split(","):
            return path
    return "/"


def _base(mount: Path, own: str) -> Path:
    """Where a call's group goes: under this process's own group where it is visible, else the mount."""
    here = mount / own.lstrip("/")
    return here if here.is_dir() else mount


class CallGroup:
    """One call's control group(s); ``procs`` are the files a process writes its pid to, to join."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs

    @property
    def procs(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    @classmethod
    def create(cls, memory_bytes: int, max_processes: int) -> CallGroup | None:
        """A group bounding memory and processes, or None where none can be made here."""
        name = f"evoaudit-call-{os.getpid()}-{next(_COUNTER)}"
        return cls._v2(name, memory_bytes, max_processes) or cls._v1(name, memory_bytes, max_processes)

    @classmethod
    def _v2(cls, name: str, memory_bytes: int, max_processes: int) -> CallGroup | None:
        base = _base(CGROUP_ROOT, _own_path(""))
        try:
            if not {"memory", "pids"} <= set((base / "cgroup.subtree_control").read_text().split()):
                return None
            d = base / name
            d.mkdir()
        except OSError:
            return None
        group = cls([d])
        try:
            (d / "memory.max").write_text(str(memory_bytes))
            if (d / "memory.swap.max").exists():
                (d / "memory.swap.max").write_text("0")
            (d / "pids.max").write_text(str(max_processes))
        except OSError:
            group.close()
            return None
        return group

    @classmethod
    def _v1(cls, name: str, memory_bytes: int, max_processes: int) -> CallGroup | None:
        dirs: list[Path] = []
        group = cls(dirs)
        try:
            for hierarchy in _V1:
                mount = CGROUP_ROOT / hierarchy
                if not (mount / "cgroup.procs").exists():
                    group.close()
                    return None
                d = _base(mount, _own_path(hierarchy)) / name
                d.mkdir()
                dirs.append(d)
            mem, pids = dirs
            (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            (pids / "pids.max").write_text(str(max_processes))
        except OSError:
            group.close()
            return None
        return group

    def _pids(self) -> set[int]:
        out: set[int] = set()
        for procs in self.procs:
            try:
                out |= {int(p) for p in Path(procs).read_text().split()}
            except (OSError, ValueError):
                pass
        return out

    def close(self) -> None:
        """Kill every process still in the group, then remove it (never raises)."""
        for _ in range(50):
            pids = self._pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)
        for d in reversed(self.dirs):
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
