"""What a freeze must cover before endpoints may open, and what every artifact of a lineage must share.

The configured artifacts are every lineage × evolved method, plus the placebo of each method whose
placebo condition is evaluated. The workflow's target list and the unseal check both come from here, so
they cannot disagree.
"""

from __future__ import annotations

import json
from pathlib import Path

from evoaudit.config import Config
from evoaudit.hashing import sha256_file
from evoaudit.records import Manifest
from evoaudit.seal.manifest import SealError


def artifact_names(cfg: Config) -> list[str]:
    """Artifact directory names of one lineage: every method, then each evaluated placebo."""
    return list(cfg.methods) + sorted({c for c in cfg.conditions if c.startswith("placebo-")})


def round_methods(cfg: Config) -> list[str]:
    """The methods that evolve again in rounds 2.. (``methods_params.rounds``): every evolved method;
    static has nothing to evolve and a placebo is shaped after its method's first-round artifact."""
    return [m for m in cfg.methods if m != "static"]


def round_artifact(round_index: int, lineage: str, method: str) -> str:
    """Where round ``round_index``'s artifact lives (round 1: the protocol's own ``artifacts/``)."""
    if round_index == 1:
        return f"artifacts/{lineage}/{method}"
    return f"rounds/{round_index}/artifacts/{lineage}/{method}"


def configured_artifacts(cfg: Config, lineage: str | None = None) -> list[str]:
    """``artifacts/<lineage>/<name>`` of every configured artifact (of one lineage when given), then each
    later round's ``rounds/<r>/artifacts/<lineage>/<method>``: endpoints open only once the last round of
    every lineage is frozen."""
    lineages = [lineage] if lineage is not None else list(cfg.lineages)
    first = [f"artifacts/{ln}/{name}" for ln in lineages for name in artifact_names(cfg)]
    later = [
        round_artifact(r, ln, m)
        for r in range(2, cfg.methods_params.rounds + 1)
        for ln in lineages
        for m in round_methods(cfg)
    ]
    return first + later


def missing_artifacts(manifest: Manifest, cfg: Config, lineage: str | None = None) -> list[str]:
    """Configured artifacts whose meta.json the manifest does not list."""
    listed = {e.path for e in manifest.entries}
    return [a for a in configured_artifacts(cfg, lineage) if f"{a}/meta.json" not in listed]


def require_coverage(manifest: Manifest, cfg: Config, where: Path, lineage: str | None = None) -> None:
    """Refuse to unseal unless the manifest covers every configured artifact (of ``lineage`` if given)."""
    missing = missing_artifacts(manifest, cfg, lineage)
    if missing:
        scope = f"lineage {lineage}" if lineage else "every lineage (seal_scope: global)"
        raise SealError(
            f"protocol rule 'endpoint blindness': {where} does not cover {len(missing)} configured "
            f"artifact(s) of {scope}: {', '.join(missing)}. Endpoints open only when every configured "
            "lineage × method × placebo artifact is frozen; evolve and freeze them first"
        )


def lineage_acquisition(lineage: str, artifact_dirs: list[Path]) -> str:
    """The one acquisition sha256 every artifact of a lineage evolved from (matched acquisition). A later
    round's artifact evolved from its own round's acquisition, which deployed its previous round's
    artifact: it is held to the first round's record its chain started from (``inputs.origin_acquisition``),
    and its previous round (``inputs.prior_meta``) must be among ``artifact_dirs``."""
    seen: dict[str, list[str]] = {}
    metas = {sha256_file(d / "meta.json"): d for d in artifact_dirs if (d / "meta.json").is_file()}
    for d in artifact_dirs:
        meta = json.loads((d / "meta.json").read_text())
        prior = meta.get("inputs", {}).get("prior_meta")
        if prior is not None and prior not in metas:
            raise SealError(
                f"freeze {lineage}: {d}/meta.json evolved from a previous round's artifact (meta.json sha256 "
                f"{prior[:12]}) that is not among this lineage's artifacts: its chain is broken - re-evolve "
                "the later rounds"
            )
        acq = meta.get("inputs", {}).get("origin_acquisition") or meta.get("inputs", {}).get("acquisition")
        if not acq:
            raise SealError(
                f"freeze {lineage}: {d}/meta.json records no acquisition hash (inputs.acquisition); "
                "re-evolve it from this lineage's acquisition record"
            )
        seen.setdefault(acq, []).append(d.name)
    if len(seen) != 1:
        listing = "; ".join(f"{h[:12]}: {', '.join(sorted(n))}" for h, n in sorted(seen.items()))
        raise SealError(
            f"protocol rule 'matched acquisition': the artifacts of lineage {lineage} evolved from "
            f"{len(seen)} different acquisition records ({listing}); every method of a lineage must evolve "
            "from the same record - re-evolve the stale ones"
        )
    return next(iter(seen))
