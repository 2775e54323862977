"""Artifacts: a directory holding the state a method deploys and ``meta.json`` describing it."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoaudit import atomic
from evoaudit.records import SCHEMA_VERSION
from evoaudit.seal.manifest import artifact_files

__all__ = ["ArtifactMeta", "artifact_files", "clear_artifact", "read_meta", "write_artifact"]


class ArtifactMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    method: str
    lineage: str
    state_files: list[str]  # file names inside the artifact directory, in insertion order
    inputs: dict[str, str] = Field(default_factory=dict)  # input name -> sha256
    diagnostics: dict[str, Any] = Field(default_factory=dict)


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
    meta_text = json.dumps(meta.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    atomic.write_text(directory / "meta.json", meta_text)


def read_meta(directory: Path) -> ArtifactMeta:
    return ArtifactMeta.model_validate_json((directory / "meta.json").read_text())


