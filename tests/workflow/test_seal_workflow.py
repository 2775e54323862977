"""The seal in the DAG: which jobs an evaluation waits for under each seal scope, and adding a lineage."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import copy_workflow, snakemake, write_config

# Replay mismatches only get recorded here: this file is about the seal, replay has its own tests.
SEAL = {"verify_sample": 2, "replay_on_mismatch": "record"}
SMALL = {
    "methods": ["static"],
    "conditions": ["static"],
    "suite": {"goals": ["injection_task_0"]},
    "seal": SEAL,
}
TARGET = "results/evaluate/L1/static/benign/shard0.jsonl"


def _job_counts(stdout: str) -> dict[str, int]:
    table = stdout.split("Job stats:", 1)[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_global_scope_keeps_every_lineage_sealed_until_all_are_frozen(tmp_path):
    copy_workflow(tmp_path, {"lineages": ["L1", "L2"]})
    counts = _job_counts(snakemake(tmp_path, "-n", TARGET).stdout)
    assert counts["acquire"] == 2 and counts["freeze_lineage"] == 2
    assert counts["freeze"] == 1 and counts["unseal"] == 1 and counts["unseal_lineage"] == 1


def test_lineage_scope_lets_one_lineage_proceed_alone(tmp_path):
    copy_workflow(tmp_path, {"lineages": ["L1", "L2"], "seal": {"seal_scope": "lineage"}})
    counts = _job_counts(snakemake(tmp_path, "-n", TARGET).stdout)
    assert counts["acquire"] == 1 and counts["freeze_lineage"] == 1 and counts["unseal_lineage"] == 1
    assert "freeze" not in counts and "unseal" not in counts


@pytest.mark.slow
def test_adding_a_lineage_reruns_no_existing_evaluation_and_is_logged_as_an_extension(tmp_path):
    copy_workflow(tmp_path, SMALL | {"lineages": ["L1"]})
    snakemake(tmp_path)
    shard = tmp_path / "results/evaluate/L1/static/attacked/shard0.jsonl"
    mtime = shard.stat().st_mtime_ns
    report = (tmp_path / "results/report/report.md").read_text()
    root = json.loads((tmp_path / "results/freeze/manifest.json").read_text())["root"]
    assert root in report

    # Default policy: a new global root after endpoints were opened is refused, naming the rule.
    write_config(tmp_path, SMALL | {"lineages": ["L1", "L2"]})
    refused = snakemake(tmp_path, check=False)
    assert refused.returncode != 0
    assert "one unseal per freeze" in (tmp_path / "results/logs/unseal.log").read_text()

    write_config(tmp_path, SMALL | {"lineages": ["L1", "L2"], "seal": SEAL | {"unseal_new_root": "extend"}})
    plan_text = snakemake(tmp_path, "-n").stdout
    plan = _job_counts(plan_text)
    assert plan["evaluate"] == 2  # L2's benign and attacked shards only
    assert "output: results/evaluate/L1/" not in plan_text  # no evaluation of L1 is redone
    snakemake(tmp_path)
    assert shard.stat().st_mtime_ns == mtime
    log = [json.loads(x) for x in (tmp_path / "results/freeze/unseal_log.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in log] == ["first", "extension"]
    noop = snakemake(tmp_path, "-n")
    assert "Nothing to be done" in noop.stdout + noop.stderr


@pytest.mark.slow
def test_an_unsealed_artifact_is_not_re_evolved_until_redo_archives_it(tmp_path):
    copy_workflow(tmp_path, SMALL | {"lineages": ["L1"]})
    snakemake(tmp_path)
    meta = tmp_path / "results/artifacts/L1/static/meta.json"
    frozen = meta.read_bytes()

    # A change that reruns evolve meets the frozen artifact and is refused before anything is deleted:
    # by Snakemake's write protection, or (where that does not bind, e.g. for root) by evolve itself.
    write_config(tmp_path, SMALL | {"lineages": ["L1"], "optimizer": {"temperature": 0.5}})
    refused = snakemake(tmp_path, check=False)
    assert refused.returncode != 0
    log = tmp_path / "results/logs/evolve/L1/static.log"
    said = refused.stdout + refused.stderr + (log.read_text() if log.exists() else "")
    assert "Write-protected output files for rule evolve" in said or "evoaudit redo --lineage L1" in said
    assert meta.read_bytes() == frozen

    redo = subprocess.run(
        [sys.executable, "-m", "evoaudit.cli", "redo", "--lineage", "L1", "--artifact", "static",
         "--reason", "optimizer temperature changed"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert redo.returncode == 0, redo.stderr
    snakemake(tmp_path)
    assert meta.exists()
    superseded = (tmp_path / "results/freeze/superseded/log.jsonl").read_text().splitlines()
    (entry,) = [json.loads(x) for x in superseded]
    assert entry["artifact"] == "artifacts/L1/static" and entry["reason"] == "optimizer temperature changed"
    assert (tmp_path / "results" / entry["archived_to"] / "meta.json").read_bytes() == frozen
