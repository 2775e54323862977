"""Shared by every method: matched acquisition, bounded retries of malformed optimizer output, and the
simulator's role answers being well-formed for each method's parser."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evoaudit import config as config_mod
from evoaudit.hashing import sha256_file
from evoaudit.methods import awm, reasoningbank, skillopt
from evoaudit.methods.common import MalformedOutput, call_structured, parse_json_object
from evoaudit.methods.evolve import AcquisitionMismatch, assert_acquisition, evolve
from evoaudit.models.base import ChatRequest, ChatResponse
from evoaudit.models.sim import roles as sim_roles
from evoaudit.records import AcquisitionRecord, ExecutedCall, Message, Outcome, Rollout


def make_rollout(
    family: str,
    variant: str,
    utility: bool,
    calls: list[tuple[str, dict]] | None = None,
    prompt: str | None = None,
    infra: str | None = None,
) -> Rollout:
    """A small acquisition rollout built in code."""
    calls = calls if calls is not None else [("get_most_recent_transactions", {"n": 100}), ("send_money", {})]
    executed = [
        ExecutedCall(call_id=f"c{i}", function=f, args=a, result="ok") for i, (f, a) in enumerate(calls)
    ]
    return Rollout(
        rollout_id=f"L1/acquire/benign/{family}.{variant}/none",
        lineage="L1",
        condition="acquire",
        arm="benign",
        instance_id=f"{family}.{variant}",
        family=family,
        variant=variant,
        split="seen",
        seed=1,
        executor={"backend": "test"},
        pre_state_sha256="0" * 64,
        messages=[
            Message(role="system", content="base"),
            Message(role="user", content=prompt or f"Please handle request {family}"),
        ],
        calls=executed,
        final_output="Done.",
        terminal_state={},
        outcome=Outcome(utility=utility, attack_success=None, exposed=False, infra_failure=infra),
    )


class ScriptedBackend:
    """Returns the given replies in order (the last one repeats) and counts requests."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.requests: list[ChatRequest] = []

    def fingerprint(self) -> dict:
        return {"backend": "scripted"}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        text = self.replies[min(len(self.requests) - 1, len(self.replies) - 1)]
        return ChatResponse(message=Message(role="assistant", content=text))


def test_acquisition_hash_assertion_refuses_a_changed_record(tmp_path: Path):
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(make_rollout("user_task_0", "v0", True).model_dump_json() + "\n")
    record = tmp_path / "record.json"
    AcquisitionRecord(
        lineage="L1",
        path=rollouts.as_posix(),
        sha256=sha256_file(rollouts),
        rollouts=0,
        successes=0,
        infra_failures=0,
        executor={},
    ).write(record)
    assert assert_acquisition(rollouts, record) == sha256_file(rollouts)
    rollouts.write_text(
        rollouts.read_text() + make_rollout("user_task_1", "v0", False).model_dump_json() + "\n"
    )
    with pytest.raises(AcquisitionMismatch, match="matched acquisition"):
        assert_acquisition(rollouts, record)
    # The evolve entry point checks it before reading anything else (no table is needed to fail).
    with pytest.raises(AcquisitionMismatch):
        evolve(config_mod.from_dict({}), "L1", "skillopt", rollouts, record, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "error"),
    [("not json", "not valid JSON"), ("[1, 2]", "expected a JSON object")],
)
def test_parse_json_object_rejects_non_objects(text, error):
    with pytest.raises(MalformedOutput, match=error):
        parse_json_object(text)
    assert parse_json_object('```json\n{"a": 1}\n```') == {"a": 1}


def test_malformed_output_is_retried_then_recorded_as_a_failed_call():
    bad = ScriptedBackend(["{not json", '{"edits": [{"kind": "rewrite", "text": "x"}]}'])
    value, log = asyncio.run(
        call_structured(
            bad,
            [Message(role="user", content="x")],
            lambda t: skillopt.parse_edits(t, 4, "failure"),
            seed=lambda a: a,
            max_attempts=3,
            purpose="test",
        )
    )
    assert value is None and not log.ok
    assert len(bad.requests) == 3  # bounded: exactly max_attempts requests
    assert "not valid JSON" in log.attempts[0]["error"] and "rewrite" in log.attempts[1]["error"]
    # Each retry shows the model its parse error.
    assert "could not be used" in (bad.requests[1].messages[-1].content or "")
    good = ScriptedBackend(["oops", '{"edits": []}'])
    value, log = asyncio.run(
        call_structured(
            good,
            [Message(role="user", content="x")],
            lambda t: skillopt.parse_edits(t, 4, "failure"),
            seed=lambda a: a,
            max_attempts=3,
            purpose="test",
        )
    )
    assert value == [] and log.ok and len(good.requests) == 2


def test_simulator_role_answers_parse_with_each_methods_parser():
    cfg = config_mod.from_dict({})
    fail = make_rollout("user_task_1", "v0", False, calls=[("send_money", {"amount": 10})])
    ok = make_rollout("user_task_2", "v1", True)
    # SkillOpt reflection, both foci.
    for focus, labelled in (("failure", [(fail, False)]), ("success", [(ok, True)])):
        msgs = skillopt.reflection_messages(
            cfg.methods_params.skillopt.initial_skill, labelled, focus, config_mod.method_settings(cfg)
        )
        reply = sim_roles.respond(msgs, 1)
        assert reply is not None
        edits = skillopt.parse_edits(reply.content, 4, focus)
        assert edits, focus
    # The failure diagnosis comes from the trajectory: a write with no read before it.
    msgs = skillopt.reflection_messages(
        "# Banking task skill\n", [(fail, False)], "failure", config_mod.method_settings(cfg)
    )
    assert "transaction history" in (sim_roles.respond(msgs, 1).content or "")
    # AWM induction.
    reply = sim_roles.respond(awm.induction_messages([ok]), 1)
    text = awm.parse_workflows(reply.content, 10)
    assert "<action>get_most_recent_transactions(n=100)</action>" in text
    # ReasoningBank distillation, both prompts, and the item cap announced in the prompt.
    for rollout, label in ((ok, True), (fail, False)):
        reply = sim_roles.respond(reasoningbank.distil_messages(rollout, label, 2), 1)
        items = reasoningbank.parse_items(reply.content, 2, "success" if label else "failure")
        assert 1 <= len(items) <= 2
    # An agent turn is not a role request.
    assert (
        sim_roles.respond([Message(role="system", content="You are a careful banking assistant.")], 1) is None
    )


def test_judge_labels_are_an_option_and_fall_back_to_the_checker_when_malformed():
    from evoaudit.methods.evolve import label_trajectories

    rollouts = [make_rollout("user_task_1", "v0", True), make_rollout("user_task_2", "v0", False)]
    checker = config_mod.from_dict({})
    labelled, info = asyncio.run(label_trajectories(checker, "L1", rollouts, ScriptedBackend(["unused"])))
    assert [label for _, label in labelled] == [True, False] and info == {"success_label": "checker"}
    judge = config_mod.from_dict({"methods_params": {"success_label": "judge", "max_attempts": 2}})
    backend = ScriptedBackend(['{"success": false, "reason": "x"}', "garbled", "garbled"])
    labelled, info = asyncio.run(label_trajectories(judge, "L1", rollouts, backend))
    # First trajectory judged false (disagrees with the checker); second stays malformed -> checker label.
    assert [label for _, label in labelled] == [False, False]
    assert info["judge_vs_checker_disagreements"] == 1 and info["judge_fallbacks"] == 1
    # The judge sees no outcome label.
    assert "Outcome:" not in (backend.requests[0].messages[-1].content or "")


@pytest.mark.parametrize(
    ("calls", "guidance"),
    [
        ([("send_money", {"amount": 1})], "read_first"),
        ([("get_most_recent_transactions", {"n": 100}), ("send_money", {"amount": 1})], "values"),
        ([], "no_action"),
        ([("get_balance", {})], "answer"),
    ],
)
def test_simulated_reflection_is_derived_from_the_failed_trajectories(calls, guidance):
    cfg = config_mod.from_dict({})
    failed = make_rollout("user_task_1", "v0", False, calls=calls)
    msgs = skillopt.reflection_messages(
        "# Banking task skill\n", [(failed, False)], "failure", config_mod.method_settings(cfg)
    )
    edits = skillopt.parse_edits(sim_roles.respond(msgs, 1).content, 4, "failure")
    text = "\n".join(e.text or "" for e in edits)
    assert sim_roles.GUIDANCE[guidance] in text
    assert all(sim_roles.GUIDANCE[k] not in text for k in sim_roles.GUIDANCE if k != guidance)


def test_placebos_run_the_configured_goal_subset_of_the_audits_goals():
    from evoaudit.methods.conditions import condition, condition_goals

    goals = ("injection_task_0", "injection_task_4", "injection_task_6", "injection_task_7")
    placebo = ("injection_task_4", "injection_task_6", "injection_task_7", "injection_task_8")
    assert condition_goals(condition("skillopt"), goals, placebo) == list(goals)
    assert condition_goals(condition("placebo-awm"), goals, placebo) == list(goals[1:])
    assert condition_goals(condition("placebo-skillopt"), ("injection_task_0",), placebo) == []
