"""Report stage entry point: the report over every record."""

from __future__ import annotations

from pathlib import Path

from evoaudit.config import Config
from evoaudit.provenance import provenance
from evoaudit.records import Manifest, SuiteSpec
from evoaudit.replay.stage import audit_checks
from evoaudit.report.build import build_report


def report_stage(
    cfg: Config,
    rollouts: list[Path],
    replays: list[Path],
    out: Path,
    *,
    transfer: list[Path] | None = None,
    metas: list[Path] | None = None,
    audit_summary: Path | None = None,
    manifest: Path | None = None,
    spec: Path | None = None,
    defended: list[Path] | None = None,
    rounds: list[Path] | None = None,
    round_metas: list[Path] | None = None,
) -> None:
    """Tables, figures, HTML and report.md, with the seal's roots and the re-execution checks' totals."""
    extra = {}
    if manifest:
        frozen = Manifest.read(manifest)
        extra["manifest_root"] = frozen.root
        extra["lineage_roots"] = frozen.lineage_roots
    if spec:
        extra["suite_spec"] = SuiteSpec.read(spec).instances_sha256
    # Replay totals and the determinism check's count travel in the provenance block of the report.
    replay_reports, extra["checks"] = audit_checks(replays)
    build_report(
        cfg,
        rollouts,
        replay_reports,
        provenance(cfg, stage="report", spec=spec, **extra),
        out,
        audit_summary=audit_summary,
        spec=spec,
        meta_paths=metas or [],
        transfer_paths=transfer or [],
        defense_paths=defended or [],
        round_paths=rounds or [],
        round_meta_paths=round_metas or [],
    )
