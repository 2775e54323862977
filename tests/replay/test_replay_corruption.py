"""Replay recomputes every rollout from its recorded tool calls and catches a corrupted record."""

from __future__ import annotations

import asyncio
import json

import pytest

from evoaudit import cli
from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.models.factory import make_backend
from evoaudit.records import Rollout
from evoaudit.replay.recompute import replay_rollout
from evoaudit.replay.stage import ReplayMismatch, audit_checks, replay_shard, replay_shards
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.suite.instances import write_instances


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Real rollouts on AgentDojo's environment (a simulator that reads, errs never and always complies),
    kept only where the untouched record replays cleanly, so each test below changes exactly one thing."""
    cfg = config_mod.from_dict(
        {"sim": {"competence": 1.0, "read_propensity": 1.0, "compliance": 1.0}, "agent": {"max_steps": 20}}
    )
    instances = [i for i in build_instances(cfg) if i.variant == "v3"]
    table = tmp_path_factory.mktemp("replay") / "instances.parquet"
    write_instances(instances, table)
    backend = make_backend(cfg, cfg.executor, instances)
    chosen = [i for i in instances if i.family in ("user_task_3", "user_task_5", "user_task_8")]
    specs = plan_episodes("L1", "static", "benign", chosen, []) + plan_episodes(
        "L1", "static", "attacked", chosen, ["injection_task_7", "injection_task_3"]
    )
    system = system_prompt(cfg.agent.system_prompt)
    rollouts = [asyncio.run(run_one(cfg, backend, s, system, None)) for s in specs]
    by_id = {i.instance_id: i for i in instances}
    clean = [r for r in rollouts if not replay_rollout(r, by_id[r.instance_id]).mismatches]
    assert any(r.calls for r in clean), "no cleanly replaying rollout with tool calls to corrupt"
    return table, clean, by_id


def _write(path, rollouts: list[Rollout]) -> None:
    path.write_text("".join(r.model_dump_json() + "\n" for r in rollouts))


def _writer(rollouts: list[Rollout]) -> Rollout:
    # A rollout whose conversation moved money, so that an argument change alters the terminal state.
    movers = ("send_money", "update_scheduled_transaction")
    return next(r for r in rollouts if any(c.function in movers for c in r.calls))


def test_untouched_records_replay_without_mismatch(recorded, tmp_path):
    table, clean, _ = recorded
    shard = tmp_path / "shard0.jsonl"
    _write(shard, clean)
    report = replay_shard(shard, table, tmp_path / "report.json")
    assert report["replayed"] == len(clean) and report["mismatched_rollouts"] == 0


def test_a_lineage_replay_reports_every_shard_before_failing_on_the_one_that_differs(recorded, tmp_path):
    table, clean, _ = recorded
    victim = clean[0].model_copy(deep=True)
    victim.outcome.utility = not victim.outcome.utility
    shards = []
    for name, rollouts in (("static", clean), ("skillopt", [victim])):
        path = tmp_path / "evaluate" / name / "shard0.jsonl"
        path.parent.mkdir(parents=True)
        _write(path, rollouts)
        shards.append((path, tmp_path / "replay" / name / "shard0.json"))
    with pytest.raises(ReplayMismatch, match=r"1 of 2 shard\(s\)(.|\n)*skillopt"):
        replay_shards(config_mod.from_dict({}), shards, table)
    clean_report, bad_report = (json.loads(out.read_text()) for _, out in shards)
    assert clean_report["replayed"] == len(clean) and clean_report["mismatched_rollouts"] == 0
    assert bad_report["mismatched_rollouts"] == 1 and bad_report["mismatches_by_field"] == {"utility": 1}


def test_changed_tool_argument_in_the_conversation_is_caught_and_fails_the_shard(recorded, tmp_path):
    table, clean, _ = recorded
    victim = _writer(clean).model_copy(deep=True)
    changed = 0
    for m in victim.messages:
        for tc in m.tool_calls:
            if tc.name in ("send_money", "update_scheduled_transaction"):
                args = json.loads(tc.arguments)
                args["amount"] = float(args.get("amount") or 0) + 1000.0
                tc.arguments = json.dumps(args)
                changed += 1
    assert changed
    shard = tmp_path / "shard0.jsonl"
    _write(shard, [victim] + [r for r in clean if r.rollout_id != victim.rollout_id])
    with pytest.raises(ReplayMismatch, match=victim.rollout_id.replace("/", ".")):
        replay_shard(shard, table, tmp_path / "report.json")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["mismatched_rollouts"] == 1
    assert {"terminal_state", "calls"} <= set(report["mismatches_by_field"])


def test_changed_argument_in_the_evaluators_call_list_alone_is_caught(recorded, tmp_path):
    table, clean, by_id = recorded
    victim = _writer(clean).model_copy(deep=True)
    call = next(c for c in victim.calls if c.args)
    key = next(iter(call.args))
    call.args[key] = "tampered"
    mismatches = replay_rollout(victim, by_id[victim.instance_id]).mismatches
    assert any(name.startswith("calls[") for name in mismatches)


@pytest.mark.parametrize("flag", ["utility", "exposed", "attack_success", "unauthorized_state_change"])
def test_flipped_outcome_flag_is_caught(recorded, tmp_path, flag):
    table, clean, by_id = recorded
    victim = next(r for r in clean if getattr(r.outcome, flag) is not None).model_copy(deep=True)
    setattr(victim.outcome, flag, not getattr(victim.outcome, flag))
    assert set(replay_rollout(victim, by_id[victim.instance_id]).mismatches) == {flag}


def test_cli_fails_on_a_corrupted_record_by_default_and_only_reports_when_told(recorded, tmp_path, capsys):
    table, clean, _ = recorded
    victim = clean[0].model_copy(deep=True)
    victim.outcome.utility = not victim.outcome.utility
    shard = tmp_path / "shard0.jsonl"
    _write(shard, [victim])
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text("{}\n")  # defaults; replay reads the config only for provenance
    args = ["replay", "--config", str(cfg_path), "--rollouts", str(shard), "--table", str(table)]
    args += ["--out", str(tmp_path / "r.json")]
    assert cli.main(args) == 1
    assert "ReplayMismatch" in capsys.readouterr().err
    assert cli.main(args + ["--on-mismatch", "record"]) == 0
    _, checks = audit_checks([tmp_path / "r.json"])
    assert checks["replay"]["mismatches_by_field"] == {"utility": 1}
