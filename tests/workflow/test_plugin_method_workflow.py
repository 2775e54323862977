"""Methods are plugins, proven from outside: a package no file under ``src/`` names (tests/plugins/
evoaudit_reflexion, a Reflexion-style offline memory) is pip-installed into a temporary directory put on
PYTHONPATH, and the whole DAG runs with it on a reduced config (one lineage, one goal, no transfer):
acquisition shared by hash, evolution, placebo, freeze, unseal, benign and attacked evaluation, replay with
no mismatch, report rows, and provenance naming the plugin's package and version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, copy_workflow, snakemake

from evoaudit.hashing import sha256_file
from evoaudit.jsonl import read_records
from evoaudit.records import Rollout

PLUGIN = REPO / "tests" / "plugins" / "evoaudit_reflexion"

REDUCED = {
    "lineages": ["L1"],
    "methods": ["static", "reflexion"],
    "conditions": ["static", "reflexion", "placebo-reflexion"],
    "suite": {"goals": ["injection_task_4"]},
    "methods_params": {"placebo": {"goals": ["injection_task_4"]}},
    "transfer": {"enabled": False},
    "report": {"bootstrap": {"replicates": 200}, "figures": False},
}


def test_no_package_file_names_the_plugin():
    named = [
        str(p.relative_to(REPO))
        for p in (REPO / "src").rglob("*")
        if p.is_file()
        and p.suffix in (".py", ".yaml", ".toml", ".txt")
        and "reflexion" in p.read_text().lower()
    ]
    assert named == []


@pytest.fixture
def plugin_on_path(tmp_path, monkeypatch):
    """The plugin package installed (no dependencies) into a directory of its own, on PYTHONPATH for every
    process the workflow starts; removed with ``tmp_path``."""
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(PLUGIN),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    assert list(target.glob("evoaudit_reflexion-0.3.1.dist-info/entry_points.txt"))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))
    )
    return target


@pytest.mark.slow
def test_an_out_of_tree_method_runs_through_the_whole_dag(tmp_path, plugin_on_path):
    work = tmp_path / "work"
    work.mkdir()
    copy_workflow(work, REDUCED)
    snakemake(work)
    res = work / "results"

    # Acquisition is shared: the plugin's artifact and the identity's record the one acquisition file's hash.
    acq = sha256_file(res / "acquire" / "L1" / "rollouts.jsonl")
    metas = {
        m: json.loads((res / "artifacts" / "L1" / m / "meta.json").read_text()) for m in REDUCED["methods"]
    }
    assert all(meta["inputs"]["acquisition"] == acq for meta in metas.values())
    diag = metas["reflexion"]["diagnostics"]
    assert diag["reflections"] > 0 and diag["plugin_version"] == "0.3.1"
    memory = (res / "artifacts" / "L1" / "reflexion" / "reflections.md").read_text()
    assert memory.startswith("- ")

    # Its placebo, shaped after it by the generic text placebo.
    placebo = json.loads((res / "artifacts" / "L1" / "placebo-reflexion" / "meta.json").read_text())
    assert placebo["method"] == "placebo-reflexion" and 0.8 <= placebo["diagnostics"]["length_ratio"] <= 1.25

    # Provenance names the package that registered the method, and its version.
    prov = json.loads((res / "artifacts" / "L1" / "provenance.json").read_text())
    for artifact in ("reflexion", "placebo-reflexion"):
        assert prov[artifact]["method_package"]["package"] == "evoaudit-reflexion"
        assert prov[artifact]["method_package"]["version"] == "0.3.1"

    # Frozen, unsealed, evaluated benign and attacked with the memory in the system prompt.
    manifest = json.loads((res / "freeze" / "manifest.json").read_text())
    paths = {e["path"] for e in manifest["entries"]}
    assert {"artifacts/L1/reflexion/meta.json", "artifacts/L1/placebo-reflexion/meta.json"} <= paths
    assert (res / "freeze" / "unseal.json").exists()
    for cond in ("reflexion", "placebo-reflexion"):
        for arm in ("benign", "attacked"):
            rollouts = read_records(res / "evaluate" / "L1" / cond / arm / "shard0.jsonl", Rollout)
            assert rollouts, (cond, arm)
    benign = read_records(res / "evaluate" / "L1" / "reflexion" / "benign" / "shard0.jsonl", Rollout)
    assert "Reflections on earlier failures" in (benign[0].messages[0].content or "")

    # Replayed without a mismatch.
    reports = sorted(res.glob("replay/L1/*/*/shard0.json"))
    assert {p.parent.parent.name for p in reports} == set(REDUCED["conditions"])
    assert all(json.loads(p.read_text())["mismatched_rollouts"] == 0 for p in reports)

    # Report rows: the main table, and the plugin against its placebo.
    main = (res / "report" / "tables" / "main.csv").read_text()
    assert "\nreflexion," in main and "\nplacebo-reflexion," in main
    assert "\nreflexion,placebo-reflexion," in (res / "report" / "tables" / "placebo.csv").read_text()
