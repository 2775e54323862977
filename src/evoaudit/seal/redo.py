"""Frozen artifacts after unseal: re-evolving one is refused; a deliberate redo archives it first.

An artifact is covered when one of its files still has the hash an unseal event recorded for it: the
endpoints were opened with exactly that artifact, so replacing it in place would hide which artifact the
published numbers came from. ``evoaudit redo`` moves it to ``freeze/superseded/<stamp>/`` and appends the
move to ``freeze/superseded/log.jsonl``; the next run evolves it again, and the next unseal accepts the
changed root as a redo of exactly the archived artifacts.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path

from evoaudit.hashing import sha256_file
from evoaudit.paths import ARTIFACTS, Layout
from evoaudit.provenance import code_revision
from evoaudit.records import (
    SupersededEntry,
    UnsealEvent,
    read_superseded_log,
    read_unseal_log,
    superseded_log_line,
)
from evoaudit.seal.coverage import later_round
from evoaudit.seal.manifest import SealError

log = logging.getLogger(__name__)

SUPERSEDED_DIR = "superseded"
SUPERSEDED_LOG = "log.jsonl"
UNSEAL_LOG = "unseal_log.jsonl"


def _events(results_dir: Path) -> list[UnsealEvent]:
    return read_unseal_log(Path(Layout.at(results_dir).freeze(UNSEAL_LOG)))


def superseded_log(results_dir: Path) -> list[SupersededEntry]:
    return read_superseded_log(Path(Layout.at(results_dir).freeze(f"{SUPERSEDED_DIR}/{SUPERSEDED_LOG}")))


def covering_event(artifact_dir: Path, results_dir: Path) -> UnsealEvent | None:
    """The latest unseal event that recorded one of this artifact's current files with its hash."""
    if not artifact_dir.is_dir():
        return None
    rel = artifact_dir.resolve().relative_to(results_dir.resolve()).as_posix()
    current: dict[str, str] | None = None
    for event in reversed(_events(results_dir)):
        files = {p: h for p, h in event.files.items() if p.startswith(rel + "/")}
        if not files:
            continue
        if current is None:
            current = {
                f"{rel}/{p.relative_to(artifact_dir).as_posix()}": sha256_file(p)
                for p in sorted(artifact_dir.rglob("*"))
                if p.is_file()
            }
        if any(current.get(p) == h for p, h in files.items()):
            return event
    return None


def refuse_if_unsealed(artifact_dir: Path, results_dir: Path) -> None:
    """Raise before anything is deleted when the artifact in ``artifact_dir`` opened endpoints."""
    event = covering_event(artifact_dir, results_dir)
    if event is not None:
        rel = artifact_dir.resolve().relative_to(results_dir.resolve()).as_posix()
        lineage, name = rel.split("/")[-2:]
        if later_round(rel) is not None:
            raise SealError(
                f"protocol rule 'one unseal per freeze': {artifact_dir} is frozen and endpoints were "
                f"unsealed with it (unseal event {event.key} at {event.time}); a later round's "
                "artifact is not evolved again in place, and `evoaudit redo` does not rebuild a chain of "
                "rounds: run the multi-round audit again under another results_dir"
            )
        raise SealError(
            f"protocol rule 'one unseal per freeze': {artifact_dir} is frozen and endpoints were unsealed "
            f"with it (unseal event {event.key} at {event.time}, root "
            f"{event.manifest_root}); it is not evolved again in place. For a deliberate redo run "
            f"`evoaudit redo --lineage {lineage} --artifact {name} --reason '...'`, which archives it under "
            f"{results_dir}/freeze/{SUPERSEDED_DIR}/ and logs it, then rerun the workflow"
        )


def _writable(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR | (stat.S_IXUSR if p.is_dir() else 0))


def archive_for_redo(artifact_dir: Path, results_dir: Path, reason: str) -> SupersededEntry:
    """Move an unsealed artifact to ``freeze/superseded/<stamp>/<lineage>/<name>`` and log the move."""
    if not reason.strip():
        raise SealError("redo: --reason is required; it is recorded in the superseded log")
    event = covering_event(artifact_dir, results_dir)
    rel = artifact_dir.resolve().relative_to(results_dir.resolve()).as_posix()
    if event is None:
        raise SealError(
            f"redo: {artifact_dir} is not covered by any unseal event (or does not exist); nothing needs "
            "archiving - rerun the workflow, which evolves it again"
        )
    now = datetime.now(UTC)
    stamp = now.strftime("%Y%m%dT%H%M%S%fZ")
    dest = Path(Layout.at(results_dir).freeze(SUPERSEDED_DIR)) / stamp / Path(rel).relative_to(ARTIFACTS)
    files = {
        p.relative_to(artifact_dir).as_posix(): sha256_file(p)
        for p in sorted(artifact_dir.rglob("*"))
        if p.is_file()
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(artifact_dir), str(dest))
    _writable(dest.parent)  # the archive stays readable and removable; its hashes are in the log
    entry = SupersededEntry(
        artifact=rel,
        archived_to=dest.relative_to(results_dir).as_posix(),
        files=files,
        unsealed_root=event.manifest_root,
        unseal_key=event.key,
        reason=reason,
        time=now.isoformat(timespec="seconds"),
        code=code_revision(),
    )
    log_path = Path(Layout.at(results_dir).freeze(f"{SUPERSEDED_DIR}/{SUPERSEDED_LOG}"))
    with open(log_path, "a", encoding="utf-8") as fh:
        fh.write(superseded_log_line(entry))
        fh.flush()
        os.fsync(fh.fileno())
    log.warning("redo: archived %s to %s (%s)", rel, entry.archived_to, reason)
    return entry


def redone_artifacts(results_dir: Path, unsealed_root: str) -> set[str]:
    """Artifacts archived for a redo since endpoints were unsealed at ``unsealed_root``."""
    return {e.artifact for e in superseded_log(results_dir) if e.unsealed_root == unsealed_root}


def refuse_reevolving(artifact_dir: Path, results_dir: Path | None = None) -> None:
    """``refuse_if_unsealed`` for an artifact of the workflow's results directory ``results_dir`` (the
    workflow passes it). Without it, read off the layout ``<results>/artifacts/<lineage>/<name>``; a
    directory outside that layout was never frozen by the workflow and is left to its caller."""
    if results_dir is not None:
        refuse_if_unsealed(artifact_dir, results_dir)
    elif artifact_dir.parent.parent.name == "artifacts":
        refuse_if_unsealed(artifact_dir, artifact_dir.parent.parent.parent)
