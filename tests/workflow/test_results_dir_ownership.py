"""A run owns its results directory, from the workflow's side: parsing writes nothing (a dry run leaves
the tree byte-identical), a system results_dir stops the run before anything is written, and a second
configuration cannot take a results_dir another one owns (it used to replace the first run's resolved
configuration with a dry run)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow, snakemake

SMALL = {"lineages": ["L1"], "methods": ["static"], "conditions": ["static"]}


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` but Snakemake's own state (.snakemake/), with its sha256."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".snakemake" not in p.relative_to(root).parts
    }


@pytest.mark.slow  # four Snakemake invocations, each parsing the workflow
def test_a_dry_run_writes_nothing_and_a_second_configuration_cannot_take_the_directory(tmp_path):
    copy_workflow(tmp_path, SMALL)
    before = _tree(tmp_path)
    snakemake(tmp_path, "-n")
    assert _tree(tmp_path) == before and not (tmp_path / "results").exists()

    snakemake(tmp_path, "results/config/config.json")  # the first configuration starts: it owns results/
    owned = _tree(tmp_path / "results")
    assert ".evoaudit-owner.json" in owned and "config/config.json" in owned

    other = tmp_path / "config" / "other.yaml"
    other.write_text(yaml.safe_dump({"seed": 7}))
    proc = snakemake(tmp_path, "-n", "--configfile", "config/config.yaml", str(other), check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "belongs to another configuration" in text and "results_dir of its own" in text
    assert _tree(tmp_path / "results") == owned  # the first run's resolved config is untouched

    # The owner's own configuration, edited, still runs there.
    cfg = yaml.safe_load((tmp_path / "config" / "config.yaml").read_text())
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(cfg | {"seed": 8}))
    snakemake(tmp_path, "-n")


@pytest.mark.slow
def test_a_system_results_dir_stops_the_run_before_anything_is_written(tmp_path):
    copy_workflow(tmp_path, SMALL | {"results_dir": "/proc/self"})
    before = _tree(tmp_path)
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0 and "under the system directory /proc" in proc.stdout + proc.stderr
    assert _tree(tmp_path) == before
