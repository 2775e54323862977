"""What a freeze must cover before endpoints may open, and what every artifact of a lineage must share.

The configured artifacts are every lineage × evolved method, plus the placebo of each method whose
placebo condition is evaluated. The workflow's target list and the unseal check both come from here, so
they cannot disagree.
"""

from __future__ import annotations

import re
from pathlib import Path

from evoaudit import method_plugins
from evoaudit.config import Config
from evoaudit.paths import RELATIVE, ROUNDS, Layout
from evoaudit.poisoning import all_lineages
from evoaudit.records import AcquisitionRecord, ArtifactMeta, Manifest, SuiteSpec, WriteScreenRecord
from evoaudit.seal.manifest import SealError, artifact_sha256


def artifact_names(cfg: Config) -> list[str]:
    """Artifact directory names of one lineage: every method, then each evaluated placebo."""
    return list(cfg.methods) + sorted({c for c in cfg.conditions if c.startswith("placebo-")})


def round_methods(cfg: Config) -> list[str]:
    """The methods that evolve again in rounds 2.. (``methods_params.rounds``): every evolved method;
    static has nothing to evolve (``learns`` is False) and a placebo is shaped after its method's
    first-round artifact."""
    return [m for m in cfg.methods if method_plugins.learns(m)]


def later_round(rel: str | Path) -> int | None:
    """The round of a results-relative path under ``rounds/<r>/`` (r >= 2, written without a leading
    zero), else None: round 1 is the protocol's own layout."""
    parts = Path(rel).parts
    if len(parts) > 2 and parts[0] == ROUNDS and re.fullmatch(r"[1-9][0-9]*", parts[1]):
        if int(parts[1]) >= 2:
            return int(parts[1])
    return None


def round_artifact(round_index: int, lineage: str, method: str) -> str:
    """Where round ``round_index``'s artifact lives (round 1: the protocol's own ``artifacts/``)."""
    return RELATIVE.artifact(lineage, method, round=round_index)


def configured_artifacts(cfg: Config, lineage: str | None = None, later_rounds: bool = True) -> list[str]:
    """``artifacts/<lineage>/<name>`` of every configured artifact (of one lineage when given), then each
    later round's ``rounds/<r>/artifacts/<lineage>/<method>`` (unless ``later_rounds`` is False): a
    lineage's endpoints open only once its last round is frozen."""
    # The poisoning extension's lineages are sealed like the configured ones (docs/poisoning.md).
    lineages = [lineage] if lineage is not None else all_lineages(cfg)
    first = [RELATIVE.artifact(ln, name) for ln in lineages for name in artifact_names(cfg)]
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


SUITE_SPEC = RELATIVE.suite("suite_spec.json")  # under results_dir: the suite stage's spec (rule instances)


def acquisition_record(results_dir: Path, lineage: str) -> Path:
    """The first round's acquisition record of ``lineage`` (rule acquire)."""
    return Path(Layout.at(results_dir).acquire(lineage, "record.json"))


def screen_record(results_dir: Path, lineage: str) -> Path:
    """The write screens' record of ``lineage`` (rule write_screen; only when ``write_defenses`` is on)."""
    return Path(Layout.at(results_dir).screened(lineage, "record.json"))


def check_write_screen(lineage: str, artifact_dirs: list[Path], results_dir: Path) -> None:
    """The write path's hash chain: every artifact that learned (it records an instance table) learned
    through the same write screen or through none (matched acquisition, screened), and a recorded
    ``inputs.write_screen`` is the sha256 of the screened file the lineage's screen record pins, which in
    turn screened the file the acquisition record pins."""
    learned = {d: ArtifactMeta.read(d / "meta.json").inputs for d in artifact_dirs}
    learned = {d: i for d, i in learned.items() if i.get("instances") is not None}
    seen = {i.get("write_screen") for i in learned.values()}
    if len(seen) > 1:
        by_hash: dict[str, list[str]] = {}
        for d, i in learned.items():
            by_hash.setdefault(i.get("write_screen") or "unscreened", []).append(d.name)
        listing = "; ".join(f"{h[:12]}: {', '.join(sorted(n))}" for h, n in sorted(by_hash.items()))
        raise SealError(
            f"protocol rule 'matched acquisition': the artifacts of lineage {lineage} learned from different "
            f"screened records ({listing}); re-evolve the stale ones"
        )
    recorded = next(iter(seen), None)
    if recorded is None:
        return
    path = screen_record(results_dir, lineage)
    screen = WriteScreenRecord.read(path)
    acquisition = acquisition_record(results_dir, lineage)
    pinned = AcquisitionRecord.read(acquisition).sha256 if acquisition.is_file() else None
    if screen.sha256 != recorded or (pinned is not None and screen.source_sha256 != pinned):
        raise SealError(
            f"protocol rule 'matched acquisition': lineage {lineage}'s artifacts learned from a screened "
            f"record of sha256 {recorded[:12]}, but {path} pins {screen.sha256[:12]} screened from "
            f"{screen.source_sha256[:12]} (acquisition pins {(pinned or 'none')[:12]}) - rerun write_screen "
            "and re-evolve"
        )


def screen_settings_mismatch(path: Path, screen: WriteScreenRecord, cfg: Config) -> str | None:
    """Why the screen record at ``path`` did not screen under ``cfg``'s write defences (the screens and
    the enabled screens' settings, ``in_force``), or None when it did."""
    wanted = cfg.write_defenses.in_force()
    recorded = type(cfg.write_defenses).model_validate(screen.settings).in_force()
    if recorded == wanted:
        return None
    differ = sorted(k for k in wanted.keys() | recorded.keys() if wanted.get(k) != recorded.get(k))
    return (
        f"{path}: field settings records write_defenses {', '.join(differ)} other than the configuration's "
        f"(recorded {recorded}, configured {wanted}); rerun the write_screen rule of the lineage under this "
        "configuration and re-evolve its methods"
    )


def check_configured_screens(cfg: Config, lineage: str, artifact_dirs: list[Path], results_dir: Path) -> None:
    """The write screens the configuration names are the ones every learning artifact learned through:
    with ``write_defenses.screens`` set each records ``inputs.write_screen`` and the lineage's screen record
    ran with the configured settings; with none set, no artifact records one."""
    screens = bool(cfg.write_defenses.screens)
    for d in artifact_dirs:
        inputs = ArtifactMeta.read(d / "meta.json").inputs
        if inputs.get("instances") is None:
            continue  # it learned nothing (the identity), so no screen stood between it and the record
        if screens and not inputs.get("write_screen"):
            raise SealError(
                f"protocol rule 'matched acquisition': {d / 'meta.json'}: field inputs.write_screen is "
                f"missing, but write_defenses.screens is {list(cfg.write_defenses.screens)}; the artifact "
                "learned from the unscreened record - run the write_screen rule and re-evolve it"
            )
        if not screens and inputs.get("write_screen"):
            raise SealError(
                f"protocol rule 'matched acquisition': {d / 'meta.json'}: field inputs.write_screen is "
                f"{inputs['write_screen'][:12]}, but write_defenses.screens is empty; re-evolve it from the "
                "acquisition record, or configure the write screens it learned through"
            )
    if screens:
        path = screen_record(results_dir, lineage)
        if not path.is_file():
            raise SealError(
                f"protocol rule 'matched acquisition': {path} is missing while write_defenses.screens is "
                f"{list(cfg.write_defenses.screens)}; run the write_screen rule of lineage {lineage}"
            )
        why = screen_settings_mismatch(path, WriteScreenRecord.read(path), cfg)
        if why:
            raise SealError(f"protocol rule 'matched acquisition': {why}")


def check_recorded_inputs(lineage: str, artifact_dirs: list[Path], results_dir: Path) -> None:
    """Every artifact learned from this run's own inputs, by content: its ``inputs.instances`` must be the
    sha256 the suite spec committed for the instance table, and the acquisition it started from
    (``inputs.origin_acquisition``, else ``inputs.acquisition``) the sha256 this lineage's acquisition
    record pins. A label saying where an artifact came from proves nothing; its recorded hashes do.

    Each comparison is made where its reference exists under ``results_dir`` (a workflow run writes both
    before any evolve job); an artifact recording no instances hash (the identity, ``static``) read no
    table."""
    spec_path = results_dir / SUITE_SPEC
    instances = SuiteSpec.read(spec_path).instances_sha256 if spec_path.is_file() else None
    record_path = acquisition_record(results_dir, lineage)
    acquisition = AcquisitionRecord.read(record_path).sha256 if record_path.is_file() else None
    for d in artifact_dirs:
        inputs = ArtifactMeta.read(d / "meta.json").inputs
        table = inputs.get("instances")
        if instances is not None and table is not None and table != instances:
            raise SealError(
                f"protocol rule 'endpoint blindness': {d}/meta.json records instance table sha256 {table}, "
                f"but the suite spec {spec_path} committed {instances}; the artifact learned from a table "
                "other than this suite's instances - re-evolve it from the suite's instance table"
            )
        acq = inputs.get("origin_acquisition") or inputs.get("acquisition")
        if acquisition is not None and acq is not None and acq != acquisition:
            raise SealError(
                f"protocol rule 'matched acquisition': {d}/meta.json records acquisition sha256 {acq}, but "
                f"lineage {lineage}'s acquisition record {record_path} pins {acquisition} - re-evolve it "
                "from this lineage's acquisition record"
            )
