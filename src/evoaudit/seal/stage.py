"""Seal stage entry points (freeze, unseal, redo): what the workflow's scripts and the CLI both call."""

from __future__ import annotations

import logging
from pathlib import Path

from evoaudit.config import Config
from evoaudit.paths import Layout
from evoaudit.provenance import write_provenance
from evoaudit.records import LineageOpening, Manifest, SupersededEntry, UnsealEvent
from evoaudit.seal.coverage import artifact_names, check_configured_screens, require_coverage, round_methods
from evoaudit.seal.freeze import combine_manifests, freeze, freeze_lineage, open_lineage, unseal
from evoaudit.seal.manifest import SealError, read_manifest
from evoaudit.seal.redo import archive_for_redo, covering_event

log = logging.getLogger(__name__)


def freeze_stage(
    cfg: Config,
    paths: list[Path],
    results_dir: Path,
    manifest_out: Path,
    *,
    lineage: str | None = None,
    combine: bool = False,
) -> Manifest:
    """One lineage's manifest (``lineage``), the global one over lineage manifests (``combine``), or an
    ad hoc manifest over the given artifact directories."""
    if combine:
        manifest = combine_manifests(paths, results_dir, manifest_out)
    elif lineage:
        check_configured_screens(cfg, lineage, paths, results_dir)  # the configured screens, none other
        manifest = freeze_lineage(lineage, paths, results_dir, manifest_out)
    else:
        manifest = freeze(paths, results_dir, manifest_out)
    write_provenance(manifest_out, cfg, "freeze", manifest=manifest_out)
    log.info("froze %d files into %s, manifest root %s", len(manifest.entries), manifest_out, manifest.root)
    return manifest


def unseal_stage(
    cfg: Config,
    manifest_path: Path,
    results_dir: Path,
    event_out: Path,
    *,
    lineage: str | None = None,
    force: bool = False,
) -> UnsealEvent | LineageOpening:
    """Open endpoints: globally, or for one lineage. Refused unless the manifest covers every configured
    artifact of the scope (every lineage, or this lineage under seal_scope lineage)."""
    manifest = read_manifest(manifest_path)
    require_coverage(manifest, cfg, manifest_path, lineage)
    if lineage and cfg.seal.seal_scope == "global":
        # Global scope: a lineage opens only against the global unseal event.
        event = open_lineage(manifest_path, Path(Layout.at(results_dir).freeze("unseal.json")), event_out)
    else:
        scope = "lineage" if lineage else "global"
        event = unseal(
            manifest_path,
            results_dir,
            event_out,
            scope=scope,
            policy=cfg.seal.unseal_new_root,
            force=force,
        )
    write_provenance(event_out, cfg, "unseal", manifest=manifest_path, unseal_kind=event.kind)
    log.info("unsealed (%s) for manifest root %s: %s", event.kind, event.manifest_root, event_out)
    return event


def redo_stage(
    cfg: Config, results_dir: Path, lineage: str, artifact: str, reason: str
) -> list[SupersededEntry]:
    """Archive one unsealed artifact under ``freeze/superseded/`` so that the next run evolves it again.

    A method's placebo is shaped after it, so it is rebuilt too: an unsealed placebo is archived with it."""
    names = artifact_names(cfg)
    if lineage not in cfg.lineages or artifact not in names:
        raise SealError(
            f"redo: {lineage}/{artifact} is not a configured artifact (lineages {list(cfg.lineages)}, "
            f"artifacts {names})"
        )
    if cfg.methods_params.rounds > 1 and artifact in round_methods(cfg):
        # Its later rounds, and their acquisitions, were built on it; archiving one link would leave them
        # to be redone from a record the unsealed rounds already used.
        raise SealError(
            f"redo: {lineage}/{artifact} starts a chain of {cfg.methods_params.rounds} rounds "
            "(methods_params.rounds); redo does not rebuild a chain of rounds: run the multi-round audit "
            "again under another results_dir"
        )
    layout = Layout.at(results_dir)
    entries = [archive_for_redo(Path(layout.artifact(lineage, artifact)), results_dir, reason)]
    dependant = Path(layout.artifact(lineage, f"placebo-{artifact}"))
    if f"placebo-{artifact}" in names and covering_event(dependant, results_dir) is not None:
        entries.append(archive_for_redo(dependant, results_dir, f"{reason} (placebo of {artifact})"))
    return entries
