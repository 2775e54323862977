"""What a freeze must cover before endpoints may open, and what every artifact of a lineage must share.

The configured artifacts are every lineage × evolved method, plus the placebo of each method whose
placebo condition is evaluated. The workflow's target list and the unseal check both come from here, so
they cannot disagree.
"""

from __future__ import annotations

import re
from pathlib import Path

from evoaudit.config import Config
from evoaudit.records import ArtifactMeta, Manifest
from evoaudit.seal.manifest import SealError, artifact_sha256


def artifact_names(cfg: Config) -> list[str]:
    """Artifact directory names of one lineage: every method, then each evaluated placebo."""
    return list(cfg.methods) + sorted({c for c in cfg.conditions if c.startswith("placebo-")})


def round_methods(cfg: Config) -> list[str]:
    """The methods that evolve again in rounds 2.. (``methods_params.rounds``): every evolved method;
    static has nothing to evolve and a placebo is shaped after its method's first-round artifact."""
    return [m for m in cfg.methods if m != "static"]


def later_round(rel: str | Path) -> int | None:
    """The round of a results-relative path under ``rounds/<r>/`` (r >= 2, written without a leading
    zero), else None: round 1 is the protocol's own layout."""
    parts = Path(rel).parts
    if len(parts) > 2 and parts[0] == "rounds" and re.fullmatch(r"[1-9][0-9]*", parts[1]):
        if int(parts[1]) >= 2:
            return int(parts[1])
    return None


def round_artifact(round_index: int, lineage: str, method: str) -> str:
    """Where round ``round_index``'s artifact lives (round 1: the protocol's own ``artifacts/``)."""
    if round_index == 1:
        return f"artifacts/{lineage}/{method}"
    return f"rounds/{round_index}/artifacts/{lineage}/{method}"


def configured_artifacts(cfg: Config, lineage: str | None = None, later_rounds: bool = True) -> list[str]:
    """``artifacts/<lineage>/<name>`` of every configured artifact (of one lineage when given), then each
    later round's ``rounds/<r>/artifacts/<lineage>/<method>`` (unless ``later_rounds`` is False): a
    lineage's endpoints open only once its last round is frozen."""
    lineages = [lineage] if lineage is not None else list(cfg.lineages)
    first = [f"artifacts/{ln}/{name}" for ln in lineages for name in artifact_names(cfg)]
    later = [
        round_artifact(r, ln, m)
        for r in range(2, cfg.methods_params.rounds + 1 if later_rounds else 2)
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


def check_round_chains(lineage: str, artifact_dirs: list[Path], results_dir: Path) -> None:
    """Each later round's artifact (``rounds/<r>/artifacts/<lineage>/<method>``) must have evolved from
    round r-1's artifact of its method as it is now, file for file (``inputs.prior_artifact``, which its
    evolve job checked against what its round's acquisition deployed), and round r-1 must be frozen with
    it."""
    frozen = {d.resolve() for d in artifact_dirs}
    for d in artifact_dirs:
        r = later_round(d.resolve().relative_to(results_dir.resolve()))
        if r is None:
            continue
        prior = results_dir / round_artifact(r - 1, lineage, d.name)
        recorded = ArtifactMeta.read(d / "meta.json").inputs.get("prior_artifact")
        if prior.resolve() not in frozen or recorded != artifact_sha256(prior):
            raise SealError(
                f"freeze {lineage}: {d} did not evolve from {prior} as it is now (recorded files hash "
                f"{(recorded or 'none')[:12]}): the chain of rounds is broken - re-evolve round {r} and after"
            )


def lineage_acquisition(lineage: str, artifact_dirs: list[Path]) -> str:
    """The one acquisition sha256 every artifact of a lineage evolved from (matched acquisition). A later
    round's artifact evolved from its own round's acquisition, which deployed its previous round's
    artifact: it is held to the first round's record its chain started from (``inputs.origin_acquisition``;
    ``check_round_chains`` checks the chain itself)."""
    seen: dict[str, list[str]] = {}
    for d in artifact_dirs:
        inputs = ArtifactMeta.read(d / "meta.json").inputs
        acq = inputs.get("origin_acquisition") or inputs.get("acquisition")
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
