"""What the suites a configuration runs need from the machine (system packages, a sandbox), checked by the
workflow's pre-flight before any job starts, so that a fresh machine stops in seconds with the install line
instead of failing a job minutes in. Each suite that needs something answers in its own folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evoaudit.errors import AuditError
from evoaudit.suite.registry import names, resolve

if TYPE_CHECKING:
    from evoaudit.config import Config


class MachineRequirementError(AuditError):
    """This machine lacks something the configured suites need."""


@dataclass(frozen=True)
class Missing:
    """One unmet need: why it is needed, and the Debian package that meets it (None: a setting does)."""

    reason: str
    package: str | None


def missing(cfg: Config) -> list[Missing]:
    """Every registered suite's unmet needs for ``cfg`` (each says whether the run uses it: APEX-Harm runs
    beside Banking under ``apex.enabled``)."""
    return [m for name in names("machine") for m in resolve("machine", name)(cfg)]


def check(cfg: Config) -> None:
    """Raise, naming every unmet need and one install command, when the machine cannot run ``cfg``."""
    needs = missing(cfg)
    if not needs:
        return
    packages = sorted({m.package for m in needs if m.package})
    lines = [f"this machine cannot run the configured audit ({len(needs)} unmet):"]
    lines += [f"  - {m.reason}" for m in needs]
    if packages:
        sudo = "" if os.geteuid() == 0 else "sudo "
        lines.append(f"install with: {sudo}apt-get update && {sudo}apt-get install -y {' '.join(packages)}")
    raise MachineRequirementError("\n".join(lines))
