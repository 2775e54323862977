"""What APEX-Harm needs from the machine: a sandbox for ``run_command``, and gcc while its attack set (whose
ELF programs gcc compiles) is still to be built. Standard library only: checked before any job starts."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from evoaudit.suite.apex import isolation
from evoaudit.suite.machine import Missing


def missing(cfg: Any) -> list[Missing]:
    if not (cfg.apex.enabled or cfg.suite.name == "apex"):
        return []
    out: list[Missing] = []
    try:
        isolation.require_sandbox(cfg.suite.apex)
    except isolation.SandboxUnavailableError as exc:
        # Only the default (bubblewrap) is installable; a named backend that does not start is a setting.
        out.append(Missing(str(exc), "bubblewrap" if cfg.suite.apex.sandbox in ("auto", "bwrap") else None))
    if shutil.which("gcc") is None and not (Path(cfg.suite.apex.out) / "attacks.json").exists():
        out.append(
            Missing("building the APEX attack set compiles its ELF programs with gcc, not on PATH", "gcc")
        )
    return out
