"""Freeze (hash every artifact, make it read-only) and unseal (record one event that opens endpoints)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from evoaudit.methods.artifact import artifact_files
from evoaudit.provenance import code_revision
from evoaudit.records import Manifest
from evoaudit.seal.manifest import SealError, build_manifest, make_read_only, verify_manifest


def freeze(artifact_dirs: list[Path], results_dir: Path, manifest_path: Path) -> Manifest:
    files = [f for d in artifact_dirs for f in artifact_files(d)]
    if not files:
        raise SealError("freeze: no artifact files found; every configured method must have evolved first")
    manifest = build_manifest(files, results_dir)
    for f in files:
        make_read_only(f)
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n")
    return manifest


def read_manifest(path: Path) -> Manifest:
    return Manifest.model_validate_json(path.read_text())


def unseal(manifest_path: Path, results_dir: Path, event_path: Path, force: bool = False) -> dict:
    """Record one unseal event. Same root again: a no-op. Different root: refused unless forced."""
    manifest = read_manifest(manifest_path)
    verify_manifest(manifest, results_dir)
    if event_path.exists():
        previous = json.loads(event_path.read_text())
        if previous["manifest_root"] == manifest.root:
            return previous
        if not force:
            raise SealError(
                f"unseal: endpoints were already unsealed for manifest root {previous['manifest_root']}; "
                f"the manifest now has root {manifest.root}. Evaluations against the old root would mix "
                "with new ones; pass --force to record a forced unseal"
            )
    event = {
        "manifest_root": manifest.root,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": code_revision(),
        "forced": bool(force and event_path.exists()),
    }
    event_path.write_text(json.dumps(event, indent=2, sort_keys=True) + "\n")
    return event
