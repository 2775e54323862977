"""Replay of an evaluated APEX rollout: rebuilt through the suite's environment half, re-run, and every
recorded outcome recomputed by replay's own code; tampering is caught."""

from __future__ import annotations

import json
import re
import time

import pytest

from evoaudit import config as config_mod
from evoaudit.config import suite_view
from evoaudit.models.sim.apex import SimAttacker
from evoaudit.records import Call, ExecutedCall, Message, Outcome, Rollout, ToolCall
from evoaudit.replay.apex import replay_apex_rollout
from evoaudit.suite.apex.adapter import ApexSuite
from evoaudit.suite.apex.attacks import attack_set as attack_sets
from evoaudit.suite.apex.attacks.attacker import Attacker
from evoaudit.suite.apex.attacks.probes import exposure_plan, oracle_answer, oracle_plan
from evoaudit.suite.apex.commands import apex_build
from evoaudit.suite.apex.judging.success import TaskFacts
from evoaudit.suite.apex.runtime.isolation import sandbox_works
from evoaudit.suite.apex.worlds import goals
from evoaudit.suite.apex.worlds.generate import build_task

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
    suite = ApexSuite()
    instance = next(i for i in suite.build_instances(suite_view(cfg)) if i.family == TASK)
    return suite, instance, task, attack_sets.load_attack_set(out / "attacks.json")


def _rollout(suite, instance, task, attack, comply: bool, extra: tuple = ()) -> Rollout:
    env = suite.build_environment(instance, attack.attack_id, {})
    pre = suite.copy_environment(env)
    plan = exposure_plan(attack) + list(extra)
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


@pytest.mark.skipif(not sandbox_works("bwrap"), reason="bubblewrap does not start here")
def test_a_listing_made_a_minute_earlier_replays_and_a_changed_listing_is_caught(world):
    suite, instance, task, instances = world
    attack = next(a for a in instances if a.attack_id.startswith("c1."))
    rollout = _rollout(suite, instance, task, attack, False, (("run_command", {"command": "ls -la; date"}),))
    k = len(rollout.messages) - 1
    listing = rollout.messages[k].content or ""
    assert re.search(r"\d\d:\d\d", listing)  # the listing shows when the copy was written
    earlier = rollout.model_copy(deep=True)
    earlier.messages[k].content = re.sub(r"\d\d:\d\d", "03:07", listing)
    assert earlier.messages[k].content != listing
    time.sleep(1.1)  # the replay's `date` prints another second
    assert replay_apex_rollout(earlier, instance).mismatches == {}
    renamed = rollout.model_copy(deep=True)
    renamed.messages[k].content = listing.replace(" .\n", " forged\n", 1)
    assert renamed.messages[k].content != listing
    caught = replay_apex_rollout(renamed, instance).mismatches
    assert f"tool_result[{rollout.messages[k].tool_call_id}]" in caught


# Not solved: replay re-runs a workspace program, so a program whose effect differs from run to run (the
# clock, random bytes, a zip's time stamps) re-makes another terminal state, and with the default
# seal.replay_on_mismatch: fail a model that runs one stops the run. Recording each call's copied-back files
# (so replay re-applies them instead of re-running the program) would close it.
@pytest.mark.skipif(not sandbox_works("bwrap"), reason="bubblewrap does not start here")
@pytest.mark.xfail(strict=True, reason="a nondeterministic program's effects are re-run, not re-applied")
def test_a_program_whose_output_changes_between_runs_replays_without_a_mismatch(world):
    suite, instance, task, instances = world
    attack = next(a for a in instances if a.attack_id.startswith("c1."))
    stamp = 'python -c \'import time; open("stamp.txt", "w").write(str(time.time_ns()))\''
    rollout = _rollout(suite, instance, task, attack, False, (("run_command", {"command": stamp}),))
    assert rollout.terminal_state["files"]["stamp.txt"]  # the program ran and its file was copied back
    assert replay_apex_rollout(rollout, instance).mismatches == {}
