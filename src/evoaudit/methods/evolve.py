"""Evolve entry point: assert matched acquisition, then run one method for one lineage."""

from __future__ import annotations

import json
from pathlib import Path

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.hashing import sha256_file
from evoaudit.methods.static import evolve_static


class AcquisitionMismatch(AuditError):
    pass


def assert_acquisition(rollouts: Path, record: Path) -> str:
    """Matched acquisition: the record read must be byte-identical to the one acquisition finished."""
    expected = json.loads(record.read_text())["sha256"]
    actual = sha256_file(rollouts)
    if actual != expected:
        raise AcquisitionMismatch(
            f"matched acquisition: {rollouts} has sha256 {actual}, but acquisition recorded {expected} in "
            f"{record}; every method of a lineage must evolve from the same record - rerun acquisition"
        )
    return actual


def evolve(cfg: Config, lineage: str, method: str, rollouts: Path, record: Path, out_dir: Path) -> None:
    acq_sha = assert_acquisition(rollouts, record)
    if method == "static":
        evolve_static(out_dir, lineage, acq_sha)
        return
    raise ValueError(f"unknown method {method!r}")
