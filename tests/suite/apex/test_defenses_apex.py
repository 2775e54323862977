"""Data marking in an APEX-Harm workspace: the workspace tools' results reach the model marked, the
episode goes through the same loop and runner as Banking's, and APEX replay still finds no mismatch."""

from __future__ import annotations

import asyncio

import pytest

from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.config import suite_view
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.models.factory import make_backend
from evoaudit.models.sim.apex import SimAttacker
from evoaudit.replay.apex import replay_apex_rollout
from evoaudit.suite.apex.adapter import ApexSuite
from evoaudit.suite.apex.attacks import attack_set as attack_sets
from evoaudit.suite.apex.attacks.attacker import Attacker
from evoaudit.suite.apex.commands import apex_build
from evoaudit.suite.apex.worlds.generate import build_task
from evoaudit.suite.defenses import data_marker

TASK = "ib_wacc"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("apex")
    cfg = config_mod.from_dict(
        {"suite": {"apex": {"scale": 0.05, "out": str(out)}}, "apex": {"tasks": [TASK]}}, "test config"
    )
    apex_build(cfg.suite.apex, tasks=[TASK])
    task = build_task(TASK, "v0", cfg.suite.apex.seed, 0.05)
    attack_sets.build_attack_set(
        out / "attacks.json", [task], Attacker(SimAttacker(), "sim"), attack_sets.AttackOptions()
    )
    built = ApexSuite().build_instances(suite_view(cfg))
    instance = next(i for i in built if i.family == TASK and i.role == "endpoint")
    attacks = attack_sets.load_attack_set(out / "attacks.json")
    attack = next(a for a in attacks if a.attack_id.startswith("c1."))
    return cfg, instance, attack.attack_id


def _run(world, defense, goal):
    cfg, instance, _ = world
    backend = make_backend(cfg, cfg.executor, [instance])
    arm = "attacked" if goal else "benign"
    spec = plan_episodes("r0", "sim", arm, [instance], [goal] if goal else [], defense)[0]
    return asyncio.run(run_one(cfg, backend, spec, system_prompt(cfg.apex.system_prompt), "pin"))


@pytest.mark.parametrize("attacked", [False, True], ids=["benign", "attacked"])
def test_apex_tool_results_reach_the_model_marked_and_replay_without_a_mismatch(world, attacked):
    _, instance, attack = world
    r = _run(world, "data_marking", attack if attacked else None)
    assert r.outcome.infra_failure is None and r.defense == "data_marking"
    m = data_marker(r.seed)
    tools = [x.content or "" for x in r.messages if x.role == "tool"]
    assert tools and all(t.startswith(f"[data {m}]\n") and t.endswith(f"\n[/data {m}]") for t in tools)
    assert [f"[data {m}]\n{c.error or c.result}\n[/data {m}]" for c in r.calls] == tools
    assert f"[data {m}]" in r.messages[0].content
    assert replay_apex_rollout(r, instance).mismatches == {}
    # Deterministic: the same episode again is the same conversation.
    assert _run(world, "data_marking", attack if attacked else None).messages == r.messages


def test_apex_replay_holds_a_rollout_to_its_shards_defence_and_to_what_the_defence_wrote(world, tmp_path):
    from evoaudit.replay.stage import replay_shard

    _, instance, attack = world
    r = _run(world, "data_marking", attack)
    shard = tmp_path / "shard0.jsonl"
    shard.write_text(r.model_dump_json() + "\n")
    out = tmp_path / "report.json"
    by_id = {instance.instance_id: instance}
    # The undefended rule (defense None) and the data_marking one, as workflow/rules/apex.smk passes them.
    undefended = replay_shard(shard, shard, out, "record", instances=by_id, defense=None)
    assert undefended["mismatches_by_field"] == {"defense": 1}
    assert (
        replay_shard(shard, shard, out, instances=by_id, defense="data_marking")["mismatched_rollouts"] == 0
    )
    swapped = r.model_copy(deep=True)
    swapped.messages[0] = swapped.messages[0].model_copy(update={"content": "You are a helpful assistant."})
    assert "defense.system" in replay_apex_rollout(swapped, instance).mismatches


def test_llm_monitor_in_an_apex_workspace_hides_the_note_and_replay_reads_exposure_off_what_was_shown(world):
    import dataclasses

    cfg, instance, attack = world
    backend = make_backend(cfg, cfg.executor, [instance])
    system = system_prompt(cfg.apex.system_prompt)
    from evoaudit.models.sim.monitor import planted_score
    from evoaudit.suite.apex.attacks.attack_set import load_attack_set

    core = next(a for a in load_attack_set(cfg.suite.apex.out + "/attacks.json") if a.attack_id == attack)
    plain = _run(world, None, attack)
    assert plain.outcome.exposed is True  # the undefended agent read the note
    note = next(c.result for c in plain.calls if core.core_instruction in " ".join(c.result.split()))
    # The threshold the planted monitor's score of the note reaches: that output, at least, is omitted.
    threshold = planted_score(note)
    spec = plan_episodes("r0", "sim", "attacked", [instance], [attack], "llm_monitor")[0]
    spec = dataclasses.replace(spec, monitor_threshold=threshold)
    r = asyncio.run(run_one(cfg, backend, spec, system, "pin"))
    assert r.monitor_threshold == threshold and all(c.monitor_score is not None for c in r.calls)
    for c, m in zip(r.calls, [m for m in r.messages if m.role == "tool"], strict=True):
        assert (m.content == "<Data omitted because a prompt injection was detected>") is (
            c.monitor_score >= threshold
        )
    shown = [m.content for m in r.messages if m.role == "tool"]
    assert "<Data omitted because a prompt injection was detected>" in shown
    # The raw results still hold the note; the model did not see it, so the episode is not exposed, and
    # replay, reading exposure off the tool messages as the evaluator does, agrees.
    assert r.outcome.exposed is False
    assert replay_apex_rollout(r, instance).mismatches == {}
