"""Manifests: sorted {path, bytes, sha256} entries and a root hash over them."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from evoaudit import atomic
from evoaudit.errors import AuditError
from evoaudit.hashing import sha256_file, sha256_json
from evoaudit.records import Manifest, ManifestEntry


class SealError(AuditError):
    """A protocol rule of the seal was about to be broken; the message names the rule."""


def root_hash(entries: list[ManifestEntry]) -> str:
    h = hashlib.sha256()
    for e in entries:
        h.update(f"{e.path}\0{e.bytes}\0{e.sha256}\n".encode())
    return h.hexdigest()


def artifact_files(directory: Path) -> list[Path]:
    """Every file of an artifact directory, sorted: what a manifest covers and evaluation verifies."""
    return sorted(p for p in directory.rglob("*") if p.is_file())


def artifact_sha256(directory: Path) -> str:
    """One hash over an artifact directory's files (name -> sha256): what a rollout records as the
    artifact it deployed, and what a later round records of the artifact it evolved from."""
    return sha256_json({p.name: sha256_file(p) for p in artifact_files(directory)})


def build_manifest(files: list[Path], base: Path, lineage: str | None = None) -> Manifest:
    entries = sorted(
        (
            ManifestEntry(path=f.relative_to(base).as_posix(), bytes=f.stat().st_size, sha256=sha256_file(f))
            for f in files
        ),
        key=lambda e: e.path,
    )
    return Manifest(entries=entries, root=root_hash(entries), lineage=lineage)


def make_read_only(path: Path) -> None:
    mode = path.stat().st_mode
    os.chmod(path, mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_manifest(path: Path) -> Manifest:
    if not path.exists():
        raise SealError(f"freeze manifest {path} does not exist; run the freeze stage first")
    return Manifest.read(path)


def verify_manifest(manifest: Manifest, base: Path) -> None:
    """Every listed file present with the listed hash, and the root consistent with the entries."""
    if not manifest.entries:
        raise SealError("freeze manifest: it lists no file; an empty manifest proves nothing was frozen")
    if root_hash(manifest.entries) != manifest.root:
        raise SealError("freeze manifest: root hash does not match its entries (the manifest was edited)")
    for e in manifest.entries:
        path = base / e.path
        if not path.exists():
            raise SealError(f"freeze manifest: {path} is listed but missing")
        actual = sha256_file(path)
        if actual != e.sha256:
            raise SealError(
                f"tamper evidence: {path} has sha256 {actual}, the freeze manifest says {e.sha256}"
            )


def verify_file(manifest: Manifest, base: Path, path: Path) -> str:
    """Re-hash one frozen file before use; return its sha256."""
    rel = path.resolve().relative_to(base.resolve()).as_posix()
    entry = next((e for e in manifest.entries if e.path == rel), None)
    if entry is None:
        raise SealError(f"tamper evidence: {path} is not in the freeze manifest")
    actual = sha256_file(path)
    if actual != entry.sha256:
        raise SealError(
            f"tamper evidence: {path} has sha256 {actual}, the freeze manifest says {entry.sha256}"
        )
    return actual
