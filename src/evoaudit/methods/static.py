"""``static``: the identity artifact. The unevolved executor; every other condition is compared to it."""

from __future__ import annotations

from pathlib import Path

from evoaudit.methods.artifact import ArtifactMeta, write_artifact


def evolve_static(out_dir: Path, lineage: str, acquisition_sha256: str) -> None:
    meta = ArtifactMeta(
        method="static",
        lineage=lineage,
        state_files=[],
        inputs={"acquisition": acquisition_sha256},
        diagnostics={"note": "identity: deploys no state"},
    )
    write_artifact(out_dir, meta, {})
