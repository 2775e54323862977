"""Artifacts: a directory holding the state a method deploys and ``meta.json`` describing it."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from evoaudit import atomic
from evoaudit.records import ArtifactMeta
from evoaudit.seal.manifest import artifact_files

__all__ = ["META_FILE", "ArtifactMeta", "artifact_files", "clear_artifact", "read_meta", "write_artifact"]

META_FILE = "meta.json"


def clear_artifact(directory: Path) -> None:
    """Remove a previous artifact, even one freeze made read-only, so that a rerun starts clean."""
    if not directory.exists():
        return
    for path in [directory, *directory.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR | (stat.S_IXUSR if path.is_dir() else 0))
    shutil.rmtree(directory)


def write_artifact(directory: Path, meta: ArtifactMeta, state: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in state.items():
        atomic.write_text(directory / name, text)
    # meta.json last and whole: an artifact directory without it is one a kill interrupted.
    meta.write(directory / META_FILE)


def read_meta(directory: Path) -> ArtifactMeta:
    return ArtifactMeta.read(directory / META_FILE)


