"""What is needed to reproduce an output: config hash, code revision, package versions, seeds."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from evoaudit.config import Config

PACKAGES = ("evoaudit", "agentdojo", "snakemake", "openai")


def code_revision(where: str | Path = ".") -> dict[str, Any]:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=where,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        return {"revision": None, "dirty": None}
    return {"revision": rev, "dirty": dirty}


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def provenance(cfg: Config, **extra: Any) -> dict[str, Any]:
    """Never includes a secret: endpoint configs carry only the *name* of the key's variable."""
    return {
        "config_sha256": cfg.sha256(),
        "code": code_revision(),
        "packages": package_versions(),
        "seed": cfg.seed,
        "infra_failure_policy": cfg.evaluation.infra_failure_policy,
        **extra,
    }
