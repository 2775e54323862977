"""A run owns its results directory: where ``results_dir`` may lie, and which configuration owns it.

- **Where.** ``results_dir`` must resolve (symbolic links followed) to a directory inside the checkout (the
  Snakefile's directory) or the working directory, or under one of ``results_roots``, and never to or
  under a system directory (``SYSTEM_DIRS``: ``/``, ``/etc``, ``/proc``, ``/usr``, ...), whatever
  ``results_roots`` says. A run writes, moves and deletes files there; a results_dir of ``/etc`` or
  ``/proc/self`` would have it do so among the machine's own files.
- **Whose.** The first run of a configuration writes ``OWNER_FILE`` into its results_dir: the
  configuration's hash (``config.config_sha256``, results_dir included) and the configuration files it
  was read from. A later run may use the directory when it has that hash, or was read from those files
  (the same configuration, edited or overridden on the command line: the marker then takes the new hash);
  any other configuration is refused before anything is written, naming the owner and the fix. Two
  configurations sharing a directory would replace each other's resolved configuration and outputs.

Checking reads only (the workflow checks while it is parsed, dry runs included); ``claim`` writes the
marker, from Snakemake's ``onstart``, so that parsing writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from evoaudit.config import Config, config_sha256
from evoaudit.errors import AuditError
from evoaudit.records import ResultsOwner

OWNER_FILE = ".evoaudit-owner.json"
# Directories of the system: a results_dir there, or under one, is refused whatever results_roots says.
SYSTEM_DIRS = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
)
SCRATCH_DIRS = ("/var/tmp",)  # under a system directory, yet scratch space


class ResultsDirError(AuditError):
    """results_dir is not a place this run may write to, or belongs to another configuration."""


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def system_dir(path: Path) -> str | None:
    """The system directory ``path`` is, or lies under; None for any other path."""
    if path == Path("/"):
        return "/"
    if any(_under(path, Path(s)) for s in SCRATCH_DIRS):
        return None
    return next((s for s in SYSTEM_DIRS if _under(path, Path(s))), None)


def check_location(cfg: Config, checkout: str | Path, source: str) -> Path:
    """The resolved results_dir, when it lies where a run may write (module docstring); else
    ResultsDirError naming the field and the fix."""
    results = _real(cfg.results_dir)
    system = system_dir(results)
    if system is not None:
        raise ResultsDirError(
            f"{source}: results_dir: {cfg.results_dir!r} resolves to {results}, "
            + ("the root directory" if system == "/" else f"under the system directory {system}")
            + "; a run writes, moves and deletes files in its results_dir. Set results_dir to a directory "
            "of its own, e.g. results-<name> inside the checkout"
        )
    for root in cfg.results_roots:
        if not os.path.isabs(root):
            raise ResultsDirError(f"{source}: results_roots: {root!r} must be an absolute path")
        real_root = _real(root)
        if system_dir(real_root) is not None:
            raise ResultsDirError(
                f"{source}: results_roots: {root!r} resolves to {real_root}, a system directory; name a "
                "directory of your own (e.g. /scratch/<user>)"
            )
    homes = [_real(checkout), _real(os.getcwd())] + [_real(r) for r in cfg.results_roots]
    if not any(_under(results, home) and results != home for home in homes):
        raise ResultsDirError(
            f"{source}: results_dir: {cfg.results_dir!r} resolves to {results}, outside the checkout "
            f"({_real(checkout)}) and the working directory; put it inside the checkout, or name the "
            "directory it lies under in results_roots (an absolute path, never a system directory)"
        )
    return results


def _files(configfiles: Sequence[str | Path]) -> list[str]:
    return [str(_real(f)) for f in configfiles]


def check_owner(cfg: Config, configfiles: Sequence[str | Path], source: str) -> ResultsOwner | None:
    """The results_dir's owner, when it is this configuration (or none yet: None); else ResultsDirError
    naming the owner and the fix. Reads only."""
    marker = Path(cfg.results_dir) / OWNER_FILE
    if not marker.is_file():
        return None
    owner = ResultsOwner.read(marker)
    if owner.config_sha256 == config_sha256(cfg) or owner.config_files == _files(configfiles):
        return owner
    theirs = ", ".join(owner.config_files) or "(no file)"
    mine = ", ".join(_files(configfiles)) or "(no file)"
    raise ResultsDirError(
        f"{source}: results_dir {cfg.results_dir!r} belongs to another configuration: {marker} names "
        f"config sha256 {owner.config_sha256[:12]}… read from {theirs}, "
        f"and this one is {config_sha256(cfg)[:12]}… read from {mine}. "
        "Give this configuration a results_dir of its own (results_dir: results-<name> in its file), or, to "
        f"hand the directory over to it, delete {marker}"
    )


def claim(cfg: Config, configfiles: Sequence[str | Path], source: str) -> Path:
    """Write (or update) ``OWNER_FILE`` for this configuration, after ``check_owner``; returns its path."""
    owner = check_owner(cfg, configfiles, source)
    marker = Path(cfg.results_dir) / OWNER_FILE
    files = _files(configfiles)
    if owner is not None and owner.config_sha256 == config_sha256(cfg) and owner.config_files == files:
        return marker
    marker.parent.mkdir(parents=True, exist_ok=True)
    ResultsOwner(
        config_sha256=config_sha256(cfg),
        config_files=files,
        since=owner.since if owner is not None else datetime.now(UTC).isoformat(timespec="seconds"),
    ).write(marker)
    return marker
