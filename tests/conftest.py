"""Shared fixtures: small configs built in code and a copy of the workflow in a temporary directory."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evoaudit import config as config_mod

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cfg():
    """The default configuration with every default filled in."""
    return config_mod.from_dict({})


def copy_workflow(dest: Path, overrides: dict | None = None) -> Path:
    """A runnable copy of the workflow (Snakefile, rules, stage scripts, schema, config) in ``dest``."""
    shutil.copy(REPO / "Snakefile", dest / "Snakefile")
    shutil.copytree(REPO / "workflow", dest / "workflow", symlinks=False)
    shutil.copytree(REPO / "scripts", dest / "scripts", symlinks=False)
    write_config(dest, overrides)
    return dest


def write_config(dest: Path, overrides: dict | None = None) -> None:
    """The shipped configuration with ``overrides`` on top, as the config of the workflow copy in ``dest``
    (also to reconfigure a copy already made: its rules stay as they are)."""
    (dest / "config").mkdir(exist_ok=True)
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    # The APEX-Harm half of the default target stays off in copies unless a test configures it: Banking
    # workflow tests keep their time budget; tests/workflow/test_apex_workflow.py runs the APEX half.
    base["apex"] = {**(base.get("apex") or {}), "enabled": False}
    base.update(overrides or {})
    (dest / "config" / "config.yaml").write_text(yaml.safe_dump(base, sort_keys=False))


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the real Snakemake scheduler on a workflow copy."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "--directory", str(workdir), *args]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def write_suite_spec(path: Path, instances: list, endpoint_variants: tuple[str, ...], table: Path) -> dict:
    """The sealed tables of ``instances`` beside ``table`` and a suite spec committing them at ``path``, as
    the suite stage writes one; the fields a suite describes itself by are placeholders."""
    from evoaudit.suite.stage import write_sealed_tables, write_spec

    base = {
        "suite": "banking",
        "benchmark_version": "test",
        "checker_audit_profile": "published",
        "checker_audit_sha256": "0" * 64,
        "variant_probes_sha256": "0" * 64,
        "families": sorted({i.family for i in instances}),
        "excluded": {},
        "official_unchanged": [],
        "official_only_spurious": [],
        "corrections": {},
        "goal_checkers": {},
        "goal_checker_probes": None,
    }
    return write_spec(path, {**base, **write_sealed_tables(instances, endpoint_variants, table)}, instances)
