"""Replay checks a defended rollout against its shard's defence and against everything its defence wrote,
not only the tool text: a relabelled, moved or trimmed defended record is a mismatch."""

from __future__ import annotations

import asyncio
import json

import pytest

from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.models.factory import make_backend
from evoaudit.records import Rollout
from evoaudit.replay.defended import shard_defense
from evoaudit.replay.recompute import replay_rollout
from evoaudit.replay.stage import ReplayMismatch, replay_shard
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.suite.instances import write_instances


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    cfg = config_mod.from_dict(
        {"sim": {"competence": 1.0, "read_propensity": 1.0, "compliance": 1.0}, "agent": {"max_steps": 20}}
    )
    instances = [i for i in build_instances(cfg) if i.variant == "v3"]
    table = tmp_path_factory.mktemp("replay_defense") / "instances.parquet"
    write_instances(instances, table)
    backend = make_backend(cfg, cfg.executor, instances)
    inst = next(i for i in instances if i.family == "user_task_3")
    system = system_prompt(cfg.agent.system_prompt)

    def run(defense):
        spec = plan_episodes("L1", "static", "attacked", [inst], ["injection_task_7"], defense)[0]
        return asyncio.run(run_one(cfg, backend, spec, system, None))

    runs = {d: run(d) for d in (None, "tool_filter", "repeat_user_prompt", "spotlighting_with_delimiting")}
    for name, r in runs.items():
        assert r.calls and replay_rollout(r, inst).mismatches == {}, name
    return table, inst, runs


def _shard(root, defense, rollouts: list[Rollout]):
    base = root if defense is None else root / "defense" / defense
    path = base / "evaluate" / "L1" / "static" / "attacked" / "shard0.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(r.model_dump_json() + "\n" for r in rollouts))
    return path


def test_the_shards_defence_is_the_one_its_path_names():
    assert shard_defense("results/evaluate/L1/static/attacked/shard0.jsonl") is None
    assert shard_defense("results/defense/tool_filter/evaluate/L1/static/attacked/shard0.jsonl") == (
        "tool_filter"
    )
    assert shard_defense("/x/results/apex/defense/data_marking/runs/m/benign/shard1.jsonl") == "data_marking"
    assert shard_defense("/x/results/apex/runs/m/benign/shard1.jsonl") is None


def test_a_defended_rollout_in_an_undefended_shard_is_a_defense_mismatch(setup, tmp_path):
    table, _, runs = setup
    shard = _shard(tmp_path / "results", None, [runs["tool_filter"]])
    with pytest.raises(ReplayMismatch, match="defense"):
        replay_shard(shard, table, tmp_path / "report.json")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["mismatches_by_field"] == {"defense": 1}


def test_an_undefended_rollout_in_a_defended_shard_is_a_defense_mismatch(setup, tmp_path):
    table, _, runs = setup
    shard = _shard(tmp_path / "results", "tool_filter", [runs[None]])
    report = replay_shard(shard, table, tmp_path / "report.json", "record")
    assert report["mismatches_by_field"] == {"defense": 1}
    # The rule's own defence overrides the path's: the same record replays cleanly as undefended.
    assert replay_shard(shard, table, tmp_path / "r2.json", defense=None)["mismatched_rollouts"] == 0


def test_each_record_in_its_own_shard_replays_cleanly(setup, tmp_path):
    table, _, runs = setup
    for name, r in runs.items():
        shard = _shard(tmp_path / "results", name, [r])
        assert replay_shard(shard, table, tmp_path / f"{name}.json")["mismatched_rollouts"] == 0, name


def test_an_undefended_rollout_relabelled_repeat_user_prompt_is_caught(setup):
    _, inst, runs = setup
    r = runs[None].model_copy(deep=True, update={"defense": "repeat_user_prompt"})
    assert "defense.messages" in replay_rollout(r, inst).mismatches


def test_a_repeat_user_prompt_rollout_without_its_repeated_prompts_is_caught(setup):
    _, inst, runs = setup
    r = runs["repeat_user_prompt"].model_copy(deep=True)
    prompt = r.messages[1].content
    r.messages = r.messages[:2] + [
        m for m in r.messages[2:] if not (m.role == "user" and m.content == prompt)
    ]
    assert len(r.messages) < len(runs["repeat_user_prompt"].messages)
    assert "defense.messages" in replay_rollout(r, inst).mismatches


def test_a_spotlighting_rollout_with_the_undefended_system_message_is_caught(setup):
    _, inst, runs = setup
    r = runs["spotlighting_with_delimiting"].model_copy(deep=True)
    r.messages[0] = runs[None].messages[0]
    assert "defense.system" in replay_rollout(r, inst).mismatches


def test_a_tool_filter_exchange_out_of_place_or_answered_by_another_role_is_caught(setup):
    _, inst, runs = setup
    moved = runs["tool_filter"].model_copy(deep=True)
    moved.messages = moved.messages[:1] + moved.messages[2:4] + moved.messages[1:2] + moved.messages[4:]
    assert "tool_filter_exchange" in replay_rollout(moved, inst).mismatches
    other = runs["tool_filter"].model_copy(deep=True)
    other.messages[3] = other.messages[3].model_copy(update={"role": "user"})
    assert "tool_filter_exchange" in replay_rollout(other, inst).mismatches


def test_a_lineage_replay_holds_each_shard_to_the_defence_its_rule_names(setup, tmp_path):
    from evoaudit.replay.stage import replay_shards

    table, _, runs = setup
    shard = _shard(tmp_path / "results", None, [runs["tool_filter"]])
    pairs = [(shard, tmp_path / "a.json")]
    assert replay_shards(config_mod.from_dict({}), pairs, table, defenses=["tool_filter"])[0]["replayed"] == 1
    with pytest.raises(ReplayMismatch, match="defense"):
        replay_shards(config_mod.from_dict({}), pairs, table, defenses=[None])
