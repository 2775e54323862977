"""The workflow on Snakemake's real scheduler: every stage wired, no-op rerun, targeted rerun."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from conftest import copy_workflow, snakemake

# Two lineages, the static condition only: every stage, in a couple of minutes.
SMALL = {
    "lineages": ["L1", "L2"],
    "methods": ["static"],
    "conditions": ["static"],
    "transfer": {"conditions": ["static"]},
}

STAGES = {
    "checker_audit",
    "instances",
    "acquire",
    "evolve",
    "freeze",
    "unseal",
    "evaluate",
    "replay",
    "report",
}


def _job_counts(dry_run_stdout: str) -> dict[str, int]:
    table = dry_run_stdout.split("Job stats:", 1)[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_dry_run_lists_every_stage(tmp_path):
    copy_workflow(tmp_path)
    proc = snakemake(tmp_path, "-n")
    counts = _job_counts(proc.stdout)
    assert STAGES <= set(counts)
    assert counts["acquire"] == 3  # one per default lineage


def test_every_output_of_a_configuration_goes_to_its_results_dir(tmp_path):
    copy_workflow(tmp_path, {"results_dir": "results-cues-off", "apex": {"enabled": True}})
    proc = snakemake(tmp_path, "--summary")
    files = [line.split("\t")[0] for line in proc.stdout.splitlines() if "\t" in line][1:]  # after the header
    assert files and all(f.startswith("results-cues-off/") for f in files), files[:5]
    assert any(f.startswith("results-cues-off/suite/apex/") for f in files)  # the worlds too
    assert not (tmp_path / "results").exists()


def test_bad_config_fails_at_parse_time_naming_the_field(tmp_path):
    copy_workflow(tmp_path, {"evaluation": {"shards": 0}})
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    assert "evaluation.shards: 0 is less than the minimum of 1" in proc.stdout + proc.stderr


def test_wildcards_are_constrained_to_configured_ids(tmp_path):
    copy_workflow(tmp_path, {"lineages": ["L1"]})
    proc = snakemake(tmp_path, "-n", "results/acquire/L9/rollouts.jsonl", check=False)
    assert proc.returncode != 0
    assert (
        "MissingRuleException" in proc.stdout + proc.stderr
        or "No rule to produce" in proc.stdout + proc.stderr
    )


@pytest.mark.slow
def test_full_run_then_noop_then_only_the_deleted_shard_reruns(tmp_path):
    copy_workflow(tmp_path, SMALL)
    snakemake(tmp_path)
    main = tmp_path / "results/report/tables/main.csv"
    assert main.exists()
    first = main.read_bytes()
    # The published checker audit, its 12 untouched families as the sensitivity subset, and utility under
    # attack beside benign utility.
    summary = json.loads((tmp_path / "results/suite/checker_audit_summary.json").read_text())
    assert summary["failing"] == {
        "user_task_5": "fixture_shadowed",
        "user_task_6": "fixture_shadowed",
        "user_task_8": "vacuous",
        "user_task_11": "recipient_insensitive",
    }
    sens = pd.read_csv(tmp_path / "results/report/tables/sensitivity.csv")
    assert set(sens.loc[sens["subset"] == "uncorrected", "n_families"]) == {12}
    assert pd.read_csv(main)["utility_under_attack"].notna().all()

    again = snakemake(tmp_path, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr

    (tmp_path / "results/evaluate/L2/static/attacked/shard0.jsonl").unlink()
    plan = _job_counts(snakemake(tmp_path, "-n").stdout)
    # The shard, its replay, the determinism check that samples every shard, and the report.
    assert plan == {"evaluate": 1, "replay": 1, "verify": 1, "report": 1, "all": 1, "total": 5}
    snakemake(tmp_path)
    assert main.read_bytes() == first  # deterministic: the same rollouts again
