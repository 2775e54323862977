"""Replay of an evaluated APEX rollout: rebuilt through the suite's environment half, re-run, and every
recorded outcome recomputed by replay's own code; tampering is caught."""

from __future__ import annotations

import json

import pytest

from evoaudit import config as config_mod
from evoaudit.models.sim.apex import SimAttacker
from evoaudit.records import Call, ExecutedCall, Message, Outcome, Rollout, ToolCall
from evoaudit.replay.apex import replay_apex_rollout
from evoaudit.suite.apex import attacks as attack_sets
from evoaudit.suite.apex import goals
from evoaudit.suite.apex.adapter import ApexSuite
from evoaudit.suite.apex.attacker import Attacker
from evoaudit.suite.apex.commands import apex_build
from evoaudit.suite.apex.generate import build_task
from evoaudit.suite.apex.probes import exposure_plan, oracle_answer, oracle_plan
from evoaudit.suite.apex.success import TaskFacts

TASK = "ib_wacc"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("apex")
    cfg = config_mod.from_dict({"suite": {"apex": {"scale": 0.05, "out": str(out)}}}, "test config")
    apex_build(cfg.suite.apex)
    task = build_task(TASK, "v0", cfg.suite.apex.seed, 0.05)
    attack_sets.build_attack_set(
        out / "attacks.json", [task], Attacker(SimAttacker(), "sim"), attack_sets.AttackOptions()
    )
    suite = ApexSuite()
    instance = next(i for i in suite.build_instances(cfg) if i.family == TASK)
    return suite, instance, task, attack_sets.load_attack_set(out / "attacks.json")


def _rollout(suite, instance, task, attack, comply: bool) -> Rollout:
    env = suite.build_environment(instance, attack.attack_id, {})
    pre = suite.copy_environment(env)
    plan = exposure_plan(attack)
    if comply:
        plan += oracle_plan(goals.goal(attack.goal_id), env, TaskFacts.of_task(task), oracle_answer(task))
    messages, calls = [], []
    for k, (name, args) in enumerate(plan):
        text, err = suite.run_call(env, _call(name, args))
        tc = ToolCall(id=f"c{k}", name=name, arguments=json.dumps(args))
        messages.append(Message(role="assistant", tool_calls=[tc]))
        messages.append(Message(role="tool", tool_call_id=tc.id, content=text))
        calls.append(ExecutedCall(call_id=tc.id, function=name, args=args, error=err, result=text))
    outcome = Outcome(
        utility=False,
        task_score=0.0,
        attack_success=suite.check_goal(attack.attack_id, "", pre, env),
        exposed=suite.exposed(messages, {}, attack.attack_id),
    )
    return Rollout(
        rollout_id=f"r.{attack.attack_id}", lineage="L1", condition="static", arm="attacked",
        instance_id=instance.instance_id, family=instance.family, variant=instance.variant,
        split=instance.split, goal=attack.attack_id, seed=0, executor={},
        pre_state_sha256=suite.state_sha256(pre), messages=messages, calls=calls,
        terminal_state=suite.state(env), outcome=outcome,
    )  # fmt: skip


def _call(name, args):
    return Call(function=name, args=args)


@pytest.mark.parametrize("category", ["c1.", "c3.", "c4perm."])
@pytest.mark.parametrize("comply", [True, False], ids=["comply", "read-only"])
def test_an_apex_rollout_replays_with_no_mismatch(world, category, comply):
    suite, instance, task, instances = world
    attack = next(a for a in instances if a.attack_id.startswith(category))
    rollout = _rollout(suite, instance, task, attack, comply)
    assert rollout.outcome.exposed is True
    assert rollout.outcome.attack_success is comply
    result = replay_apex_rollout(rollout, instance)
    assert result.mismatches == {}
    assert (result.success, result.exposure) == (comply, True)


def test_tampered_apex_rollouts_are_caught(world):
    suite, instance, task, instances = world
    attack = next(a for a in instances if a.attack_id.startswith("c3."))
    rollout = _rollout(suite, instance, task, attack, True)
    def with_outcome(**change):
        return rollout.model_copy(update={"outcome": rollout.outcome.model_copy(update=change)})

    flipped = with_outcome(attack_success=False)
    assert "attack_success" in replay_apex_rollout(flipped, instance).mismatches
    hidden = with_outcome(exposed=False)
    assert "exposed" in replay_apex_rollout(hidden, instance).mismatches
    edited = rollout.model_copy(deep=True)
    edited.messages[1].content = "nothing to see"
    assert "tool_result[c0]" in replay_apex_rollout(edited, instance).mismatches
