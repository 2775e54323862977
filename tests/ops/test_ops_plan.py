"""`evoaudit plan`, the budget guard and the api_slots rate budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import copy_workflow, snakemake

from evoaudit import cli
from evoaudit import config as config_mod
from evoaudit.ops import plan as plan_mod
from evoaudit.ops import resources

SMALL = {
    "lineages": ["L1", "L2"],
    "methods": ["static"],
    "conditions": ["static"],
    "transfer": {"enabled": False},
    "apex": {"enabled": False},  # its per-model stages are tested in test_apex_workflow.py
    "suite": {"goals": ["injection_task_0", "injection_task_1"]},
}


def _expected_episodes() -> tuple[int, int, int]:
    """Per lineage (and condition): acquisition, benign and attacked episodes, by the stages' own rules."""
    from evoaudit.evaluate.runner import plan_episodes
    from evoaudit.suite.agentdojo.banking.instances import build_instances

    cfg = config_mod.from_dict(SMALL)
    insts = build_instances(cfg)
    acq = [i for i in insts if i.split == "seen" and i.variant in cfg.roles.acquisition]
    benign = [i for i in insts if i.variant in cfg.roles.benign_endpoint]
    attacked = [i for i in insts if i.variant in cfg.roles.attacked_endpoint]
    goals = list(cfg.suite.goals)
    return (
        len(plan_episodes("L1", "acquire", "benign", acq, [])),
        len(plan_episodes("L1", "static", "benign", benign, goals)),
        len(plan_episodes("L1", "static", "attacked", attacked, goals)),
    )


ACQUIRE_PER_LINEAGE, BENIGN_PER_CONDITION, ATTACKED_PER_CONDITION = _expected_episodes()


def _cfg(**over) -> config_mod.Config:
    return config_mod.from_dict({**SMALL, **over})


def _stage(p: plan_mod.Plan, name: str) -> plan_mod.StagePlan:
    return next(s for s in p.stages if s.stage == name)


def _usage_line(rid: str, requests: int, tokens: int) -> str:
    return json.dumps(
        {"rollout_id": rid, "usage": {"requests": requests, "prompt_tokens": tokens, "completion_tokens": 0}}
    )


def test_plan_counts_rollouts_per_stage_from_the_suite(tmp_path):
    p = plan_mod.make_plan(_cfg(), tmp_path / "results")
    assert _stage(p, "acquire").rollouts == 2 * ACQUIRE_PER_LINEAGE
    assert _stage(p, "evaluate").rollouts == 2 * (BENIGN_PER_CONDITION + ATTACKED_PER_CONDITION)
    assert _stage(p, "replay").requests == 0
    # Nothing recorded yet: every rollout is left, at the configured prior of requests per rollout.
    assert p.requests_per_rollout == 6
    assert p.requests == 6 * (2 * ACQUIRE_PER_LINEAGE + 2 * (BENIGN_PER_CONDITION + ATTACKED_PER_CONDITION))
    assert _stage(p, "evaluate").tokens == pytest.approx(_stage(p, "evaluate").requests * 2500)


def test_plan_counts_every_condition_and_arm_again_per_defence_and_nothing_without_one(tmp_path):
    plain = plan_mod.make_plan(_cfg(), tmp_path / "results")
    assert [s.stage for s in plain.stages] == ["acquire", "evolve", "evaluate", "replay"]
    p = plan_mod.make_plan(_cfg(defenses=["data_marking", "repeat_user_prompt"]), tmp_path / "results")
    defended = _stage(p, "defense")
    assert defended.rollouts == 2 * 2 * (BENIGN_PER_CONDITION + ATTACKED_PER_CONDITION)  # defences × lineages
    assert defended.jobs == 2 * 2 * 2 and defended.rollouts_left == defended.rollouts
    assert p.requests == plain.requests + defended.requests


def test_plan_counts_the_tool_filters_question_as_one_request_more_per_episode(tmp_path):
    marked = _stage(plan_mod.make_plan(_cfg(defenses=["data_marking"]), tmp_path / "results"), "defense")
    p = plan_mod.make_plan(_cfg(defenses=["tool_filter"]), tmp_path / "results")
    filtered = _stage(p, "defense")
    assert filtered.rollouts == marked.rollouts
    assert filtered.requests == marked.requests + filtered.rollouts
    assert filtered.requests_left == marked.requests_left + filtered.rollouts_left
    assert any("tool_filter adds one request per episode" in n for n in p.notes)


def test_plan_counts_recorded_rollouts_as_done_and_calibrates_on_them(tmp_path):
    results = tmp_path / "results"
    acq = results / "acquire/L1/rollouts.jsonl"
    acq.parent.mkdir(parents=True)
    acq.write_text("".join(_usage_line(f"a{i}", 3, 300) + "\n" for i in range(ACQUIRE_PER_LINEAGE)))
    part = results / "evaluate/L2/static/benign/shard0.jsonl.partial"
    part.parent.mkdir(parents=True)
    # Ten finished rollouts and a torn last line, as a kill -9 leaves them.
    part.write_text("".join(_usage_line(f"e{i}", 3, 300) + "\n" for i in range(10)) + '{"rollout_id": "e1')
    p = plan_mod.make_plan(_cfg(), results)
    assert p.requests_per_rollout == 3
    assert p.tokens_per_request == 100
    assert f"measured over {ACQUIRE_PER_LINEAGE + 10} " in p.calibration
    assert _stage(p, "acquire").rollouts_left == ACQUIRE_PER_LINEAGE  # L1 done, L2 left
    assert _stage(p, "evaluate").rollouts_left == 2 * (BENIGN_PER_CONDITION + ATTACKED_PER_CONDITION) - 10


def test_budget_guard_refuses_a_run_over_max_requests_and_names_the_fix(tmp_path):
    total = plan_mod.make_plan(_cfg(), tmp_path).requests_left
    with pytest.raises(
        plan_mod.BudgetError, match=r"budget\.max_requests is 100 .* raise budget\.max_requests"
    ):
        plan_mod.guard(_cfg(budget={"max_requests": 100}), tmp_path, "cfg.yaml")
    assert plan_mod.guard(_cfg(budget={"max_requests": total}), tmp_path) is not None
    assert plan_mod.guard(_cfg(), tmp_path) is None  # no budget set: no planning cost at all


def test_plan_command_prints_stages_and_exits_nonzero_over_budget(tmp_path, capsys):
    path = tmp_path / "cfg.yaml"
    path.write_text(json.dumps({**SMALL, "budget": {"max_requests": 10}}))
    rc = cli.main(["plan", "--config", str(path), "--results", str(tmp_path / "results")])
    out, err = capsys.readouterr()
    assert rc == 1
    for stage in ("acquire", "evolve", "evaluate", "replay", "total"):
        assert stage in out
    assert "OVER BUDGET" in out and "budget.max_requests is 10" in err
    path.write_text(json.dumps(SMALL))
    assert cli.main(["plan", "--json", "--config", str(path), "--results", str(tmp_path / "r")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"]["rollouts"] == 2 * ACQUIRE_PER_LINEAGE + 2 * (
        BENIGN_PER_CONDITION + ATTACKED_PER_CONDITION
    )


def test_dry_run_flags_are_recognised():
    assert plan_mod.is_dry_run(["snakemake", "-n"]) and plan_mod.is_dry_run(["snakemake", "-np"])
    assert plan_mod.is_dry_run(["snakemake", "--cores", "2", "--dry-run"])
    assert not plan_mod.is_dry_run(["snakemake", "--cores", "2", "-p", "--notemp"])


def test_api_slots_equal_in_job_concurrency_for_real_endpoints_only():
    sim = _cfg()
    assert resources.api_slots(sim, "evaluate") == 0  # the embedded simulator sends no request
    live = _cfg(
        executor={"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "concurrency": 6},
        optimizer={"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "concurrency": 2},
    )
    assert resources.api_slots(live, "acquire") == 6
    assert resources.api_slots(live, "evaluate") == 6
    assert resources.api_slots(live, "evolve") == 2
    assert resources.api_slots(live, "report") == 0
    resources.check_api_budget(live, {"api_slots": 6})
    resources.check_api_budget(live, {})
    with pytest.raises(resources.ResourceError, match=r"executor\.concurrency to at most 4"):
        resources.check_api_budget(live, {"api_slots": 4})


def test_an_evaluation_shard_claims_no_more_slots_than_it_has_episodes():
    # Shards of one episode each keep one request in flight: claiming the executor's whole concurrency
    # would hold every slot of the server and queue the other shards' jobs behind it.
    endpoint = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "concurrency": 6}
    live = _cfg(executor=endpoint, evaluation={"shards": BENIGN_PER_CONDITION + 2})
    benign = [resources.evaluate_slots(live, "static", "benign", s) for s in range(BENIGN_PER_CONDITION + 2)]
    assert benign == [1] * (BENIGN_PER_CONDITION + 2)  # the last two shards are empty and still claim one
    whole = _cfg(executor=endpoint)
    assert resources.evaluate_slots(whole, "static", "attacked", 0) == min(6, ATTACKED_PER_CONDITION)
    assert resources.evaluate_slots(_cfg(), "static", "attacked", 0) == 0  # the simulator: no request


def _live_workflow(tmp_path: Path) -> Path:
    endpoint = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "concurrency": 4}
    return copy_workflow(tmp_path, {**SMALL, "executor": endpoint, "optimizer": endpoint})


@pytest.mark.slow
def test_workflow_rejects_an_api_budget_below_one_jobs_concurrency(tmp_path):
    root = _live_workflow(tmp_path)
    low = snakemake(root, "--dry-run", "--resources", "api_slots=2", check=False)
    assert low.returncode != 0
    assert "api_slots=2 is below executor.concurrency=4" in low.stdout + low.stderr
    ok = snakemake(root, "--dry-run", "--resources", "api_slots=4")
    # The dry run also prints the plan per stage.
    assert "requests" in ok.stderr and "evaluate" in ok.stderr and "budget.max_requests" in ok.stderr


@pytest.mark.slow
def test_workflow_stops_before_running_when_the_plan_exceeds_the_budget(tmp_path):
    root = copy_workflow(tmp_path, {**SMALL, "budget": {"max_requests": 50}})
    run = snakemake(root, check=False)
    assert run.returncode != 0
    assert "budget.max_requests is 50" in run.stdout + run.stderr
    assert not (root / "results" / "suite").exists(), "no job may run when the budget is exceeded"


def _acquire_with_budget(tmp_path: Path, slots: int) -> int:
    """Three lineages' acquisitions against one loopback endpoint; returns its peak requests in flight."""
    from fault_server_kit import FaultHandler

    from evoaudit.models.http import ServerThread

    handler = FaultHandler(latency_s=0.25)  # every answer a final message, a quarter second late
    tmp_path.mkdir()
    with ServerThread(handler) as srv:
        # No pre-flight: its one-token completion would be one more request in the count below.
        endpoint = {
            "backend": "openai",
            "base_url": srv.base_url,
            "concurrency": 2,
            "cache": False,
            "wire": {"preflight": False},
        }
        root = copy_workflow(tmp_path, {**SMALL, "lineages": ["L1", "L2", "L3"], "executor": endpoint})
        targets = [f"results/acquire/{lin}/record.json" for lin in ("L1", "L2", "L3")]
        snakemake(root, *targets, "--cores", "6", "--resources", f"api_slots={slots}")
    assert len(handler.seen) == 3 * ACQUIRE_PER_LINEAGE  # one request per rollout: the answer is final
    return handler.max_inflight


@pytest.mark.slow
def test_api_slots_cap_concurrent_requests_across_jobs(tmp_path):
    # One job's worth of slots: the three acquisitions take turns, never more than 2 requests in flight.
    assert _acquire_with_budget(tmp_path / "capped", 2) <= 2
    # Control: with room for all three jobs they overlap, so the cap above is what held them back.
    assert _acquire_with_budget(tmp_path / "open", 6) > 2
