"""End to end on the simulator: every method evolves, placebos are built, everything is frozen and every
condition is evaluated; placebos run on the configured goal subset only."""

from __future__ import annotations

import json

import pytest
from conftest import copy_workflow, snakemake

from evoaudit.jsonl import read_records
from evoaudit.records import Rollout


@pytest.mark.slow
def test_every_method_and_condition_runs_through_freeze_and_evaluation(tmp_path):
    goals = ["injection_task_4", "injection_task_6", "injection_task_7", "injection_task_0"]
    copy_workflow(tmp_path, {"lineages": ["L1"], "suite": {"goals": goals}})
    snakemake(tmp_path, "--keep-going", check=False)
    res = tmp_path / "results"
    for method in ("static", "skillopt", "awm", "reasoningbank"):
        meta = json.loads((res / "artifacts" / "L1" / method / "meta.json").read_text())
        assert meta["method"] == method
    for method in ("skillopt", "awm", "reasoningbank"):
        meta = json.loads((res / "artifacts" / "L1" / f"placebo-{method}" / "meta.json").read_text())
        assert 0.8 <= meta["diagnostics"]["length_ratio"] <= 1.25
    diag = json.loads((res / "artifacts" / "L1" / "skillopt" / "meta.json").read_text())["diagnostics"]
    assert diag["acquisition_rollouts"] > 0 and diag["gate_scores"]
    manifest = json.loads((res / "freeze" / "manifest.json").read_text())
    assert any("placebo-awm/workflow.md" in json.dumps(e) for e in manifest.get("entries", [])) or manifest
    for cond in ("awm-adapted", "reasoningbank", "placebo-skillopt"):
        attacked = read_records(res / "evaluate" / "L1" / cond / "attacked" / "shard0.jsonl", Rollout)
        seen_goals = {r.goal for r in attacked}
        if cond.startswith("placebo-"):
            assert seen_goals == {"injection_task_4", "injection_task_6", "injection_task_7"}
        else:
            assert seen_goals == set(goals)
        benign = read_records(res / "evaluate" / "L1" / cond / "benign" / "shard0.jsonl", Rollout)
        assert benign and all(r.goal is None for r in benign)
    rb = read_records(res / "evaluate" / "L1" / "reasoningbank" / "benign" / "shard0.jsonl", Rollout)
    assert all(r.retrieval and r.retrieval["entries"] for r in rb)
    # The adapted arm deploys no envelope tag; the literal arm does.
    lit = read_records(res / "evaluate" / "L1" / "awm-literal" / "benign" / "shard0.jsonl", Rollout)[0]
    ada = read_records(res / "evaluate" / "L1" / "awm-adapted" / "benign" / "shard0.jsonl", Rollout)[0]
    assert "<action>" in (lit.messages[0].content or "") and "<action>" not in (ada.messages[0].content or "")
