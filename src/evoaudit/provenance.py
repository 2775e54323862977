"""What is needed to reproduce an output: config hash, code revision, package versions, seeds, seal.

Every stage writes ``provenance.json`` into each directory it writes outputs to, one entry per output file
name, so that a directory copied away from the rest of the results still says where it came from.
"""

from __future__ import annotations

import fcntl
import functools
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from evoaudit.config import Config, EndpointConfig, config_sha256
from evoaudit.credentials import redact_url
from evoaudit.hashing import sha256_file
from evoaudit.records import Manifest, ProvenanceEntry, read_provenance, write_provenance_file

PACKAGES = ("evoaudit", "agentdojo", "snakemake", "openai")
PROVENANCE_FILE = "provenance.json"
SEED_DERIVATION = "sha256 of (global seed, lineage, instance, goal, turn, role); conditions share draws"


@functools.cache
def _git(where: str) -> dict[str, Any]:
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


def code_revision(where: str | Path | None = None) -> dict[str, Any]:
    """Git revision and dirty flag of the evoaudit source (not of the working directory, which is usually
    a results directory); both None for an installed, non-git copy."""
    if where is None:
        where = Path(__file__).resolve().parent
    return dict(_git(str(where)))


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def endpoint_fingerprint(ep: EndpointConfig) -> dict[str, Any]:
    """What the configuration says about an endpoint; never the key, not even the variable's value."""
    return {
        "backend": ep.backend,
        "model": ep.model,
        "base_url": redact_url(ep.base_url) if ep.base_url else ep.base_url,
        "sampling": {"temperature": ep.temperature, "max_tokens": ep.max_tokens, "extra_body": ep.extra_body},
    }


def _root(path: Path | None) -> str | None:
    if path is None or not Path(path).exists():
        return None
    return Manifest.read(path).root


def provenance(
    cfg: Config,
    *,
    stage: str | None = None,
    spec: Path | None = None,
    manifest: Path | None = None,
    executor: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Never includes a secret: endpoint configs carry only the *name* of the key's variable."""
    out = {
        "stage": stage,
        "config_sha256": config_sha256(cfg),
        "code": code_revision(),
        "packages": package_versions(),
        "suite_spec_sha256": sha256_file(spec) if spec is not None and Path(spec).exists() else None,
        "executor": executor if executor is not None else endpoint_fingerprint(cfg.executor),
        "optimizer": endpoint_fingerprint(cfg.optimizer),
        "seeds": {"global": cfg.seed, "derivation": SEED_DERIVATION},
        "seed": cfg.seed,
        "manifest_root": _root(manifest),
        "seal_scope": cfg.seal.seal_scope,
        "infra_failure_policy": cfg.evaluation.infra_failure_policy,
    }
    out.update(extra)
    return ProvenanceEntry.model_validate(out).model_dump(mode="json")


def write_provenance(
    outputs: Path | list[Path], cfg: Config, stage: str, record: dict[str, Any] | None = None, **kwargs: Any
) -> list[Path]:
    """Record the provenance of each output in ``provenance.json`` beside it, keyed by the output's name
    (merged under a lock: jobs writing into one directory run in parallel). ``record`` replaces the
    computed provenance when the caller already has it."""
    entry = dict(record) if record is not None else provenance(cfg, stage=stage, **kwargs)
    entry["stage"] = stage
    written = []
    for output in [outputs] if isinstance(outputs, Path | str) else outputs:
        output = Path(output)
        target = output.parent / PROVENANCE_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        with directory_lock(target.parent):
            current = read_provenance(target)
            current[output.name] = ProvenanceEntry.model_validate(entry)
            write_provenance_file(target, current)
        written.append(target)
    return written


@contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """An exclusive lock on a directory itself, so that no lock file is left among the outputs."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
