"""``run_command``'s per-call resource limits: their defaults live here, in one place, for the workspace's
settings and the sandbox that applies them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


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
