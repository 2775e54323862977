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
from evoaudit.records import ExecutedCall, FileEffect, Message, Outcome, Rollout, ToolCall
from evoaudit.replay.apex import replay_apex_rollout
from evoaudit.suite.apex.adapter import ApexSuite
from evoaudit.suite.apex.attacks import attack_set as attack_sets
from evoaudit.suite.apex.attacks.attacker import Attacker
from evoaudit.suite.apex.attacks.probes import exposure_plan, oracle_answer, oracle_plan
from evoaudit.suite.apex.commands import apex_build
from evoaudit.suite.apex.judging.success import TaskFacts
from evoaudit.suite.apex.runtime.isolation import sandbox_works
from evoaudit.suite.apex.runtime.transport import connect
from evoaudit.suite.apex.worlds import goals
from evoaudit.suite.apex.worlds.generate import build_task
from evoaudit.suite.environments import get_environment

TASK = "ib_wacc"
needs_bwrap = pytest.mark.skipif(not sandbox_works("bwrap"), reason="bubblewrap does not start here")


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


def _rollout(
    suite,
    instance,
    task,
    attack,
    comply: bool,
    extra: tuple = (),
    exposure: bool = True,
    kept: list | None = None,
) -> Rollout:
    env = suite.build_environment(instance, attack.attack_id, {})
    pre = suite.copy_environment(env)
    plan = (exposure_plan(attack) if exposure else []) + list(extra)
    if comply:
        plan += oracle_plan(goals.goal(attack.goal_id), env, TaskFacts.of_task(task), oracle_answer(task))
    # The loop's session: besides the text, it says what each call's program changed (agent.loop records
    # it on the call; tests/suite/apex/test_apex_sandbox.py pins that).
    session = connect(env, "direct")
    messages, calls = [], []
    for k, (name, args) in enumerate(plan):
        text, err = session.call(name, args)
        tc = ToolCall(id=f"c{k}", name=name, arguments=json.dumps(args))
        messages.append(Message(role="assistant", tool_calls=[tc]))
        messages.append(Message(role="tool", tool_call_id=tc.id, content=text))
        calls.append(
            ExecutedCall(
                call_id=tc.id, function=name, args=args, error=err, result=text,
                file_effects=session.file_effects(),
            )
        )  # fmt: skip
    if kept is not None:
        kept.append(env)  # the recording's world, for a test that compares replay's with it
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


@needs_bwrap
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


# Programs whose effects differ from run to run: the clock, and random bytes.
STAMP = 'python -c \'import time; open("stamp.txt", "w").write(str(time.time_ns()))\''
NOISE = 'python -c \'import os; open("noise.bin", "wb").write(os.urandom(64))\''
FIXED = 'python -c \'open("out.txt", "w").write("fixed")\''
# Programs whose printed text differs from run to run, and that change no file.
RANDOM = "echo $RANDOM $RANDOM $RANDOM"
MKTEMP = "mktemp"


def _with_program(world, *commands: str) -> Rollout:
    suite, instance, task, instances = world
    attack = next(a for a in instances if a.attack_id.startswith("c1."))
    extra = tuple(("run_command", {"command": c}) for c in commands)
    return _rollout(suite, instance, task, attack, False, extra)


def _effects_edited(rollout: Rollout, k: int, effects: list[FileEffect]) -> Rollout:
    edited = rollout.model_copy(deep=True)
    edited.calls[k].file_effects = effects
    return edited


@needs_bwrap
def test_a_program_whose_output_changes_between_runs_replays_without_a_mismatch(world):
    rollout = _with_program(world, STAMP)
    assert rollout.terminal_state["files"]["stamp.txt"]  # the program ran and its file was copied back
    last = rollout.calls[-1]
    assert [e.path for e in last.file_effects] == ["stamp.txt"]
    result = replay_apex_rollout(rollout, world[1])
    assert result.mismatches == {}
    assert result.nondeterministic_calls == {last.call_id: ["stamp.txt"]}


@needs_bwrap
def test_random_bytes_a_program_wrote_replay_clean_with_the_call_listed_as_nondeterministic(world):
    rollout = _with_program(world, NOISE)
    stored = Rollout.model_validate_json(rollout.model_dump_json())  # as a shard holds it
    (effect,) = stored.calls[-1].file_effects
    assert effect.path == "noise.bin" and len(effect.content()) == 64
    result = replay_apex_rollout(stored, world[1])
    assert result.mismatches == {}
    assert result.nondeterministic_calls == {stored.calls[-1].call_id: ["noise.bin"]}


@needs_bwrap
def test_under_replay_on_mismatch_fail_the_shard_passes_and_its_report_lists_the_call(world, tmp_path):
    from evoaudit.replay.stage import replay_shard

    instance = world[1]
    rollout = _with_program(world, NOISE)
    shard = tmp_path / "shard0.jsonl"
    shard.write_text(rollout.model_dump_json() + "\n")
    out = tmp_path / "report.json"
    report = replay_shard(shard, shard, out, "fail", instances={instance.instance_id: instance}, defense=None)
    assert report["mismatched_rollouts"] == 0
    listed = {"rollout_id": rollout.rollout_id, "call_id": rollout.calls[-1].call_id, "paths": ["noise.bin"]}
    assert report["nondeterministic_calls"] == [listed]
    # A shard with none keeps the report's layout from before the field.
    shard.write_text(_with_program(world, FIXED).model_dump_json() + "\n")
    replay_shard(shard, shard, out, "fail", instances={instance.instance_id: instance}, defense=None)
    assert "nondeterministic_calls" not in json.loads(out.read_text())


@needs_bwrap
def test_a_recorded_effect_edited_after_the_fact_is_caught(world):
    instance = world[1]
    rollout = _with_program(world, f"{NOISE} && {FIXED}")
    k = len(rollout.calls) - 1
    noise, fixed = rollout.calls[k].file_effects
    assert (noise.path, fixed.path) == ("noise.bin", "out.txt")
    where = f"file_effects[{rollout.calls[k].call_id}]"

    def caught(effects: list[FileEffect], at: int = k) -> dict:
        return replay_apex_rollout(_effects_edited(rollout, at, effects), instance).mismatches

    # Other bytes, with their own sha256: replay writes them, and the terminal state holds others.
    assert list(caught([FileEffect.written("noise.bin", b"forged"), fixed])) == ["terminal_state"]
    # Bytes that are not their recorded sha256's.
    torn = noise.model_copy(update={"data": FileEffect.written("noise.bin", b"forged").data})
    assert where in caught([torn, fixed])
    # A path the re-run program did not change: outside the workspace, or a file it never touched.
    for path in ("../noise.bin", "notes/noise.bin"):
        assert where in caught([noise.model_copy(update={"path": path}), fixed])
    # A file the re-run changed that the record hides, one it adds, and a deletion for a write.
    assert where in caught([noise])
    assert where in caught([noise, fixed, FileEffect.removed("stamp.txt")])
    assert where in caught([FileEffect.removed("noise.bin"), fixed])
    # An effect recorded on a call that ran no program.
    assert f"file_effects[{rollout.calls[0].call_id}]" in caught([fixed], at=0)
    # The terminal state edited, the effects intact: no recorded effect explains its digest.
    tampered = rollout.model_copy(deep=True)
    tampered.terminal_state["files"]["noise.bin"]["sha256"] = "0" * 64
    assert list(replay_apex_rollout(tampered, instance).mismatches) == ["terminal_state"]


@needs_bwrap
def test_forged_bytes_of_a_deterministic_program_are_caught_even_with_a_terminal_state_to_match(world):
    import hashlib

    rollout = _with_program(world, FIXED)
    k = len(rollout.calls) - 1
    forged = FileEffect.written("out.txt", b"forged")
    edited = _effects_edited(rollout, k, [forged])
    edited.terminal_state["files"]["out.txt"]["sha256"] = hashlib.sha256(b"forged").hexdigest()
    result = replay_apex_rollout(edited, world[1])
    # Replay's second run wrote "fixed" again: the program is deterministic, so the record is what differs.
    assert f"file_effects[{rollout.calls[k].call_id}]" in result.mismatches
    assert result.nondeterministic_calls == {}


@needs_bwrap
def test_a_varying_programs_record_that_drops_a_line_both_replay_runs_printed_is_caught(world):
    rollout = _with_program(world, f"echo keep-this-line; {RANDOM}")
    k = len(rollout.messages) - 1
    assert "keep-this-line" in (rollout.messages[k].content or "")
    assert replay_apex_rollout(rollout, world[1]).mismatches == {}  # as recorded: listed, no mismatch
    edited = rollout.model_copy(deep=True)
    edited.messages[k].content = (rollout.messages[k].content or "").replace("keep-this-line\n", "")
    result = replay_apex_rollout(edited, world[1])
    assert list(result.mismatches) == [f"tool_result[{rollout.messages[k].tool_call_id}]"]
    assert result.nondeterministic_output == []


@needs_bwrap
def test_a_deterministic_programs_effects_are_recorded_and_none_is_listed_as_nondeterministic(world):
    rollout = _with_program(world, FIXED, "rm out.txt")
    written, removed = rollout.calls[-2:]
    assert written.file_effects == [FileEffect.written("out.txt", b"fixed")]
    assert removed.file_effects == [FileEffect.removed("out.txt")]
    result = replay_apex_rollout(rollout, world[1])
    assert (result.mismatches, result.nondeterministic_calls) == ({}, {})


@needs_bwrap
def test_a_rollout_recorded_before_file_effects_replays_as_before(world):
    def without_effects(rollout: Rollout) -> Rollout:
        data = json.loads(rollout.model_dump_json())
        for c in data["calls"]:
            c.pop("file_effects", None)
        return Rollout.model_validate(data)

    steady = without_effects(_with_program(world, FIXED))
    result = replay_apex_rollout(steady, world[1])
    assert (result.mismatches, result.nondeterministic_calls) == ({}, {})
    # Without its effects a clock-writing program's terminal state is re-made, as before they were recorded.
    stamped = without_effects(_with_program(world, STAMP))
    result = replay_apex_rollout(stamped, world[1])
    assert list(result.mismatches) == ["terminal_state"] and result.nondeterministic_calls == {}




@needs_bwrap
@pytest.mark.parametrize("command", [RANDOM, MKTEMP], ids=["random", "mktemp"])
def test_a_program_printing_another_text_each_run_replays_clean_with_the_call_listed(world, command):
    rollout = _with_program(world, command)
    last = rollout.calls[-1]
    assert last.error is None and last.file_effects == []
    result = replay_apex_rollout(rollout, world[1])
    assert result.mismatches == {}
    assert result.nondeterministic_output == [last.call_id]
    assert result.nondeterministic_calls == {}


@needs_bwrap
def test_an_edited_text_of_a_deterministic_program_is_still_a_mismatch(world):
    rollout = _with_program(world, "echo hello")
    k = len(rollout.messages) - 1
    assert rollout.messages[k].content == "[exit code 0]\nhello\n"
    edited = rollout.model_copy(deep=True)
    edited.messages[k].content = "[exit code 0]\nhello world\n"
    result = replay_apex_rollout(edited, world[1])
    # Replay's second run printed what its first did, so the record is what differs.
    assert list(result.mismatches) == [f"tool_result[{rollout.messages[k].tool_call_id}]"]
    assert result.nondeterministic_output == []


@needs_bwrap
def test_the_second_run_leaves_the_state_and_the_observer_log_as_the_recording_had_them(world, monkeypatch):
    suite, instance, task, instances = world
    attack = next(a for a in instances if a.attack_id.startswith("c3.") and a.watcher is not None)
    # The program's first call reads the watched file (the watcher fires inside it), changes a file, sends
    # an app request and prints random numbers: a second run on the live world would show in all of them.
    program = (
        f"cat {attack.watcher.monitored_path} > /dev/null; echo done > done.txt; "
        'python -c \'import workspace_api; workspace_api.http_post("https://c.example/n", "n")\'; '
        f"{RANDOM}"
    )
    recording: list = []
    rollout = _rollout(
        suite, instance, task, attack, False, (("run_command", {"command": program}),), False, recording
    )
    (recorded_world,) = recording
    assert [r["action"] for r in recorded_world.observer_log][:1] == ["fire"]
    env_half = type(get_environment("apex"))
    build = env_half.build_environment
    replayed: list = []
    monkeypatch.setattr(
        env_half, "build_environment", lambda self, *a: replayed.append(build(self, *a)) or replayed[-1]
    )
    result = replay_apex_rollout(rollout, instance)
    assert result.nondeterministic_output == [rollout.calls[-1].call_id]  # the second run was made
    assert result.mismatches == {}
    (world_replayed,) = replayed
    assert world_replayed.observer_log == recorded_world.observer_log
    assert world_replayed.state() == recorded_world.state()
    assert len(world_replayed.calls) == len(recorded_world.calls)


@needs_bwrap
def test_under_replay_on_mismatch_fail_a_program_printing_another_text_each_run_is_listed(world, tmp_path):
    from evoaudit.records import ReplayReport
    from evoaudit.replay.stage import replay_shard

    instance = world[1]
    rollout = _with_program(world, RANDOM, NOISE)
    shard = tmp_path / "shard0.jsonl"
    shard.write_text(rollout.model_dump_json() + "\n")
    out = tmp_path / "report.json"
    report = replay_shard(shard, shard, out, "fail", instances={instance.instance_id: instance}, defense=None)
    assert report["mismatched_rollouts"] == 0
    printed, wrote = (c.call_id for c in rollout.calls[-2:])
    assert report["nondeterministic_calls"] == [
        {"rollout_id": rollout.rollout_id, "call_id": printed, "paths": [], "output": True},
        {"rollout_id": rollout.rollout_id, "call_id": wrote, "paths": ["noise.bin"]},
    ]
    assert [c.output for c in ReplayReport.read(out).nondeterministic_calls or []] == [True, None]
