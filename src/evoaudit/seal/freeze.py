"""Freeze (hash every artifact, make it read-only) and unseal (record the event that opens endpoints).

Manifests come in two layers. Each lineage has its own manifest (``freeze/<lineage>/manifest.json``) over
the artifacts of every configured method of that lineage, placebos included; the global manifest
(``freeze/manifest.json``) lists every entry of every lineage with a root over all of them and each
lineage's own root. Evaluations read their lineage's manifest, so adding a lineage changes the global
root but leaves the existing lineages' manifests, and hence their evaluations, untouched.

Unseal events are appended to ``freeze/unseal_log.jsonl``, which no rule declares as an output: Snakemake
deletes a job's outputs before rerunning it, and the log is what remembers that endpoints were already
opened for some root.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from evoaudit import method_plugins
from evoaudit.paths import RELATIVE, Layout
from evoaudit.provenance import code_revision, directory_lock
from evoaudit.records import LineageOpening, Manifest, UnsealEvent, read_unseal_log, unseal_log_line
from evoaudit.seal.coverage import (
    check_recorded_inputs,
    check_round_chains,
    check_write_screen,
    later_round,
    lineage_acquisition,
)
from evoaudit.seal.manifest import (
    SealError,
    artifact_files,
    build_manifest,
    make_read_only,
    read_manifest,
    root_hash,
    verify_manifest,
)
from evoaudit.seal.redo import redone_artifacts

__all__ = ["freeze", "freeze_lineage", "combine_manifests", "open_lineage", "read_manifest", "unseal"]

Scope = Literal["global", "lineage"]
NewRootPolicy = Literal["refuse", "extend", "force"]
UNSEAL_LOG = "unseal_log.jsonl"
TAMPER = "protocol rule 'tamper evidence' (a manifest lists every file of every frozen artifact)"


def freeze_lineage(
    lineage: str, artifact_dirs: list[Path], results_dir: Path, manifest_path: Path
) -> Manifest:
    """Hash every file of every artifact of one lineage, make the files read-only, write the manifest."""
    files: list[Path] = []
    for d in artifact_dirs:
        if not (d / "meta.json").is_file():
            raise SealError(
                f"freeze {lineage}: artifact {d} has no meta.json; every configured method (placebos "
                "included) must have evolved before the freeze - run the evolve stage for it"
            )
        files.extend(artifact_files(d))
    lineage_acquisition(lineage, artifact_dirs)  # one acquisition record per lineage, or no freeze
    check_round_chains(lineage, artifact_dirs, results_dir)  # each later round from its predecessor
    check_recorded_inputs(lineage, artifact_dirs, results_dir)  # learned from this run's own inputs
    check_write_screen(lineage, artifact_dirs, results_dir)  # through one write screen, chained by hash
    manifest = build_manifest(files, results_dir, lineage=lineage)
    for f in files:
        make_read_only(f)
    manifest.write(manifest_path)
    return manifest


def freeze(artifact_dirs: list[Path], results_dir: Path, manifest_path: Path) -> Manifest:
    """One manifest over the given artifact directories, with no lineage (for ad hoc use)."""
    files = [f for d in artifact_dirs for f in artifact_files(d)]
    if not files:
        raise SealError("freeze: no artifact files found; every configured method must have evolved first")
    manifest = build_manifest(files, results_dir)
    for f in files:
        make_read_only(f)
    manifest.write(manifest_path)
    return manifest


def combine_manifests(lineage_manifests: list[Path], results_dir: Path, out: Path) -> Manifest:
    """The global manifest: every lineage's entries (each re-verified), their root and each lineage's root."""
    entries = []
    roots: dict[str, str] = {}
    for path in lineage_manifests:
        m = read_manifest(path)
        if not m.lineage:
            raise SealError(f"{path}: not a lineage manifest (no lineage field); rerun the freeze stage")
        if m.lineage in roots:
            raise SealError(f"{path}: lineage {m.lineage} appears in two manifests")
        verify_manifest(m, results_dir)
        roots[m.lineage] = m.root
        entries.extend(m.entries)
    entries.sort(key=lambda e: e.path)
    paths = [e.path for e in entries]
    if len(set(paths)) != len(paths):
        raise SealError(f"{out}: one file is listed by two lineage manifests; artifact directories overlap")
    manifest = Manifest(entries=entries, root=root_hash(entries), lineage_roots=dict(sorted(roots.items())))
    manifest.write(out)
    return manifest


def unseal(
    manifest_path: Path,
    results_dir: Path,
    event_path: Path,
    *,
    scope: Scope = "global",
    policy: NewRootPolicy = "refuse",
    force: bool = False,
    log_path: Path | None = None,
) -> UnsealEvent:
    """Record one unseal event for a verified manifest and write it to ``event_path``.

    The same root again is a no-op (the logged event is rewritten unchanged). A different root is refused,
    unless ``policy`` is ``extend`` and the new manifest only adds files (a lineage, a method, a placebo)
    to the one unsealed before, every earlier file keeping its hash, or the unseal is forced (``policy``
    ``force`` or ``force``); the kind is logged either way.
    """
    manifest = read_manifest(manifest_path)
    verify_manifest(manifest, results_dir)
    require_rebuilt(manifest, manifest_path, results_dir)
    check_manifest_inputs(manifest, results_dir)
    if scope == "lineage" and not manifest.lineage:
        raise SealError(f"{manifest_path}: seal_scope lineage needs a lineage manifest, got the global one")
    if scope == "global" and manifest.lineage:
        raise SealError(
            f"{manifest_path}: seal_scope global needs the global manifest, got {manifest.lineage}'s"
        )
    key = f"lineage:{manifest.lineage}" if scope == "lineage" else "global"
    roots = {manifest.lineage: manifest.root} if scope == "lineage" else dict(manifest.lineage_roots)
    log_path = log_path or Path(Layout.at(results_dir).freeze(UNSEAL_LOG))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with directory_lock(log_path.parent):  # lineage-scope unseal jobs run in parallel
        previous = [e for e in read_unseal_log(log_path) if e.key == key]
        last = previous[-1] if previous else None
        if last is not None and last.manifest_root == manifest.root:
            last.write(event_path)
            return last
        kind = "first"
        if last is not None:
            kind = _new_root_kind(last, manifest, policy, force, log_path, results_dir)
        event = UnsealEvent(
            key=key,
            scope=scope,
            manifest_root=manifest.root,
            lineage_roots=roots,
            files={e.path: e.sha256 for e in manifest.entries},
            kind=kind,
            previous_root=None if last is None else last.manifest_root,
            time=datetime.now(UTC).isoformat(timespec="seconds"),
            code=code_revision(),
        )
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(unseal_log_line(event))
    event.write(event_path)
    return event


def rebuild_manifest(manifest: Manifest, results_dir: Path) -> Manifest:
    """The manifest as freeze would write it now: a lineage manifest over every file on disk of the artifact
    directories it lists; the global one over the lineage manifests (``freeze/<lineage>/manifest.json``)
    its ``lineage_roots`` name, each rebuilt the same way."""
    if manifest.lineage:
        dirs = sorted({_artifact_dir(e.path) for e in manifest.entries})
        files = [f for d in dirs for f in artifact_files(results_dir / d)]
        return build_manifest(files, results_dir, lineage=manifest.lineage)
    entries = []
    roots: dict[str, str] = {}
    for lineage, root in sorted(manifest.lineage_roots.items()):
        path = Path(Layout.at(results_dir).freeze("manifest.json", lineage))
        own = read_manifest(path)
        if own.root != root:
            raise SealError(
                f"{TAMPER}: the global manifest names root {root} for lineage {lineage}, {path} has "
                f"{own.root}; rerun the freeze stage instead of editing a manifest"
            )
        rebuilt = rebuild_manifest(own, results_dir)
        if rebuilt.root != own.root or root_hash(own.entries) != own.root:
            raise SealError(
                f"{TAMPER}: {path} (lineage {lineage}) is not the manifest rebuilt from its artifact "
                "directories; rerun the freeze stage instead of editing a manifest"
            )
        entries.extend(rebuilt.entries)
        roots[lineage] = rebuilt.root
    entries.sort(key=lambda e: e.path)
    return Manifest(entries=entries, root=root_hash(entries), lineage_roots=roots)


def require_rebuilt(manifest: Manifest, manifest_path: Path, results_dir: Path) -> None:
    """Refuse a manifest that differs from the one rebuilt from the lineage manifests and the artifact
    directories: a hand-edited manifest that leaves files out verifies entry by entry, yet proves nothing."""
    rebuilt = rebuild_manifest(manifest, results_dir)
    if rebuilt.root == manifest.root and rebuilt.lineage_roots == manifest.lineage_roots:
        return
    listed = {e.path: e.sha256 for e in manifest.entries}
    found = {e.path: e.sha256 for e in rebuilt.entries}
    unlisted = sorted(set(found) - set(listed))
    differ = sorted(p for p in set(found) & set(listed) if found[p] != listed[p]) + sorted(
        set(listed) - set(found)
    )
    what = (
        f"{len(unlisted)} file(s) of its artifacts are not listed, first {unlisted[0]}"
        if unlisted
        else f"{len(differ)} entrie(s) differ, first {differ[0]}"
        if differ
        else "its lineage roots differ from the lineage manifests'"
    )
    raise SealError(
        f"{TAMPER}: {manifest_path} is not the manifest rebuilt from the lineage manifests and the artifact "
        f"directories ({what}; rebuilt root {rebuilt.root}, listed {manifest.root}); rerun the freeze stage "
        "instead of editing a manifest"
    )


def check_manifest_inputs(manifest: Manifest, results_dir: Path) -> None:
    """Every artifact a manifest lists still records this run's own inputs (``check_recorded_inputs``),
    checked again at unseal: a meta.json is frozen, but the suite spec or an acquisition record beside it
    may have been rebuilt since."""
    by_lineage: dict[str, set[str]] = {}
    for entry in manifest.entries:
        d = _artifact_dir(entry.path)
        by_lineage.setdefault(d.split("/")[-2], set()).add(d)
    for lineage, dirs in sorted(by_lineage.items()):
        check_recorded_inputs(lineage, [results_dir / d for d in sorted(dirs)], results_dir)
        check_write_screen(lineage, [results_dir / d for d in sorted(dirs)], results_dir)


def _artifact_dir(path: str) -> str:
    """``artifacts/<lineage>/<name>`` (or a later round's ``rounds/<r>/artifacts/<lineage>/<name>``) of a
    manifest path."""
    parts = path.split("/")
    skip = 2 if later_round(path) is not None else 0
    if len(parts) < skip + 4 or parts[skip] != "artifacts":
        raise SealError(
            f"{TAMPER}: manifest entry {path} is not a file of an artifacts/<lineage>/<name>/ directory "
            "(or of a later round's rounds/<r>/artifacts/<lineage>/<name>/)"
        )
    return "/".join(parts[: skip + 3])


def evaluated_artifacts(results_dir: Path, dirs: set[str]) -> dict[str, Path]:
    """Of the artifact directories ``dirs``, those an evaluation record already used, with one such record.

    A shard under ``evaluate/<lineage>/<condition>/`` deploys ``artifacts/<lineage>/<artifact>``: a
    placebo condition its placebo, a method's insertion arm (``awm-literal``, ``awm-adapted``) that method's
    artifact, any other condition the artifact of its name."""
    found: dict[str, Path] = {}
    shards = [*results_dir.glob(RELATIVE.evaluate_shard("*", "*", "*", "*") + "*")]
    # A later round's: its own artifact.
    shards += results_dir.glob(RELATIVE.evaluate_shard("*", "*", "*", "*", round="*") + "*")
    for shard in sorted(shards):
        lineage, condition = shard.parts[-4], shard.parts[-3]
        # The method a condition deploys, by the installed methods' names (a method's name may hold "-").
        placebo = condition.startswith(method_plugins.PLACEBO_PREFIX)
        name = condition if placebo else (method_plugins.method_of(condition) or condition)
        r = later_round(shard.relative_to(results_dir))
        d = RELATIVE.artifact(lineage, name, round=r)
        if d in dirs and d not in found and _has_record(shard):
            found[d] = shard
    return found


def _has_record(path: Path) -> bool:
    with open(path, "rb") as fh:
        return any(line.strip() for line in fh)


def _new_root_kind(
    last: UnsealEvent,
    manifest: Manifest,
    policy: NewRootPolicy,
    force: bool,
    log_path: Path,
    results_dir: Path,
) -> str:
    if force or policy == "force":
        return "forced"
    now = {e.path: e.sha256 for e in manifest.entries}
    changed = sorted(p for p, h in last.files.items() if now.get(p) != h)
    # A deliberate redo (`evoaudit redo`) archived exactly these artifacts since the last unseal.
    redone = redone_artifacts(results_dir, last.manifest_root)
    if changed and all(_under(p, redone) for p in changed):
        return "redo"
    added = sorted(set(now) - set(last.files))
    # An extension adds whole new artifacts: a file added to an artifact that was unsealed (any of its files
    # listed before) or evaluated changes that artifact, however the earlier manifest came to omit it.
    unsealed_before = {_artifact_dir(p) for p in last.files} - redone
    grown = sorted({_artifact_dir(p) for p in added} & unsealed_before)
    evaluated = evaluated_artifacts(results_dir, {_artifact_dir(p) for p in added} - redone)
    if policy == "extend" and not changed and not grown and not evaluated:
        return "extension"
    root = manifest.root
    if changed:
        why = f"{len(changed)} frozen file(s) changed or disappeared, first {changed[0]}"
    elif evaluated:
        d, shard = next(iter(evaluated.items()))
        why = (
            f"files were added to {d}, which the evaluation record {shard} already used; an evaluated "
            "artifact is never an extension"
        )
    elif grown:
        why = f"files were added to {grown[0]}, which was unsealed before; only new artifacts extend a root"
    else:
        why = "files were only added, which seal.unseal_new_root: extend accepts"
    raise SealError(
        f"protocol rule 'one unseal per freeze': endpoints were already unsealed for manifest root "
        f"{last.manifest_root} at {last.time} (see {log_path}); the manifest now has root {root} "
        f"({why}). Artifacts produced after endpoints were opened could have seen them. To proceed anyway, "
        "set seal.unseal_new_root to extend (added artifacts only) or force, or run "
        "`evoaudit unseal --force`; the choice is recorded in the unseal log"
    )


def _under(path: str, dirs: set[str]) -> bool:
    return any(path.startswith(d + "/") for d in dirs)


def open_lineage(lineage_manifest_path: Path, global_event_path: Path, out: Path) -> LineageOpening:
    """Global scope: a lineage opens once the global unseal event covers its current manifest root."""
    manifest = read_manifest(lineage_manifest_path)
    if not global_event_path.exists():
        raise SealError(
            f"endpoint blindness: {global_event_path} does not exist; with seal_scope global every lineage "
            "must be frozen and the global unseal recorded before any endpoint variant is loaded"
        )
    event = UnsealEvent.read(global_event_path)
    if event.lineage_roots.get(manifest.lineage) != manifest.root:
        raise SealError(
            f"endpoint blindness: the global unseal event {global_event_path} does not cover lineage "
            f"{manifest.lineage} at manifest root {manifest.root} (it has "
            f"{event.lineage_roots.get(manifest.lineage)}); rerun freeze and unseal"
        )
    opened = LineageOpening(
        key=f"lineage:{manifest.lineage}",
        scope="global",
        lineage=manifest.lineage,
        manifest_root=manifest.root,
        global_root=event.manifest_root,
        unsealed_at=event.time,
        kind=event.kind,
    )
    opened.write(out)
    return opened
