"""What APEX-Harm needs from the machine: a sandbox for ``run_command``, and gcc while its worlds (five tasks'
helpers are ELF launchers) or its attack set (ELF programs) are still to be built. Standard library only:
checked before any job starts."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from evoaudit.suite.apex.runtime import isolation
from evoaudit.suite.machine import Missing

if TYPE_CHECKING:
    from evoaudit.config import Config


def missing(cfg: Config) -> list[Missing]:
    if not (cfg.apex.enabled or cfg.suite.name == "apex"):
        return []
    out: list[Missing] = []
    try:
        isolation.require_sandbox(cfg.suite.apex)
    except isolation.SandboxUnavailableError as exc:
        # Only the default (bubblewrap) is installable; a named backend that does not start is a setting.
        out.append(Missing(str(exc), "bubblewrap" if cfg.suite.apex.sandbox in ("auto", "bwrap") else None))
    built = all((Path(cfg.suite.apex.out) / name).exists() for name in ("apex_spec.json", "attacks.json"))
    if shutil.which("gcc") is None and not built:
        out.append(
            Missing(
                "building the APEX worlds and attack set compiles their ELF programs with gcc, not on PATH",
                "gcc",
            )
        )
    return out
