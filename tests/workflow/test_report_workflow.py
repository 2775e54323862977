"""The report and transfer rules on Snakemake's scheduler (dry runs: the DAG, not the numbers)."""

from __future__ import annotations

import re

import pytest
from conftest import copy_workflow, snakemake


def _job_counts(stdout: str) -> dict[str, int]:
    table = stdout.split("Job stats:", 1)[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


@pytest.mark.slow  # one dry run: about 20 s on an idle machine, much more on a loaded one
def test_transfer_evaluates_frozen_artifacts_of_the_configured_subset_only(tmp_path):
    copy_workflow(
        tmp_path,
        {
            "lineages": ["L1", "L2"],
            "methods": ["static", "skillopt"],
            "conditions": ["static", "skillopt"],
            "transfer": {"lineages": ["L2"], "conditions": ["static", "skillopt", "reasoningbank"]},
        },
    )
    proc = snakemake(tmp_path, "-n", "-p")
    counts = _job_counts(proc.stdout)
    # L2 × {static, skillopt}; reasoningbank is not in this run, and nothing is evolved again for it.
    assert counts["transfer_evaluate"] == 2 and counts["transfer_config"] == 1
    assert counts["evolve"] == 4  # 2 lineages × 2 methods, as without the check
    outs = sorted(re.findall(r"output: (results/transfer/evaluate/\S+)", proc.stdout))
    assert outs == [
        "results/transfer/evaluate/L2/skillopt/attacked/shard0.jsonl",
        "results/transfer/evaluate/L2/static/attacked/shard0.jsonl",
    ]
    # The evaluation runs the ordinary evaluate stage under the derived configuration: each transfer job
    # takes that configuration as an input (scripts/evaluate.py loads it when present).
    jobs = re.findall(r"rule transfer_evaluate:\n\s+input: ([^\n]+)", proc.stdout)
    assert len(jobs) == 2 and all("results/transfer/config.json" in inputs for inputs in jobs)
