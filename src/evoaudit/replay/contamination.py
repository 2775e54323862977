"""Replay of artifact contamination (docs/poisoning.md): re-read the poisoned acquisition and every frozen
artifact of the poisoned lineage and its twin, each file re-hashed here against its freeze manifest, call
the one contamination function (``methods.contamination.contamination``) on what was re-read, and compare
field by field with the report the contamination rule wrote."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.hashing import sha256_file, sha256_json
from evoaudit.methods.contamination import contaminated, read_acquisition
from evoaudit.methods.registry import get_method
from evoaudit.paths import Layout
from evoaudit.records import ContaminationReplayReport, ContaminationReport, Manifest


class ContaminationMismatch(AuditError):
    """Replay's recomputation of a contamination report disagrees with the report."""


def _frozen(manifest: Manifest, results: Path, directory: Path) -> str:
    """Every file of ``directory`` re-hashed against ``manifest``; the artifact's files hash (a hash of
    name -> sha256, as the seal computes it)."""
    listed = {e.path: e.sha256 for e in manifest.entries}
    hashes = {}
    for f in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = f.resolve().relative_to(results.resolve()).as_posix()
        actual = hashlib.sha256(f.read_bytes()).hexdigest()
        if listed.get(rel) != actual:
            raise ContaminationMismatch(f"replay: {f} is not as frozen (the manifest: {listed.get(rel)})")
        hashes[f.name] = actual
    return sha256_json(hashes)


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            _diff(a.get(k), b.get(k), f"{path}.{k}" if path else k, out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(path)


def replay_contamination(
    cfg: Config, report_path: Path, results: Path, out: Path, on_mismatch: str = "fail"
) -> ContaminationReplayReport:
    report = ContaminationReport.read(report_path)
    sha, _ = read_acquisition(results, report.lineage)
    if sha != report.acquisition_sha256:
        raise ContaminationMismatch(
            f"replay: {report.lineage}'s acquisition is not the one {report_path} was computed from"
        )
    layout = Layout.at(results)
    manifests = {
        ln: Manifest.read(Path(layout.freeze("manifest.json", ln))) for ln in (report.lineage, report.twin)
    }

    def units_of(lineage: str, method: str, round: int) -> tuple[str, list]:
        directory = Path(layout.artifact(lineage, method, round))
        return _frozen(manifests[lineage], results, directory), get_method(method).units(directory)

    found, rows = contaminated(cfg, results, report.lineage, report.twin, units_of)
    again = report.model_copy(update={"identifiers": found, "artifacts": rows})
    mismatches: list[str] = []
    _diff(report.model_dump(mode="json"), again.model_dump(mode="json"), "", mismatches)
    result = ContaminationReplayReport(
        lineage=report.lineage,
        report_sha256=sha256_file(report_path),
        artifacts=len(rows),
        mismatches=mismatches,
    )
    result.write(out)
    if mismatches and on_mismatch == "fail":
        raise ContaminationMismatch(f"replay: {report_path} disagrees with its recomputation in {mismatches}")
    return result
