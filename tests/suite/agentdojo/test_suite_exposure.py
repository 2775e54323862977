"""Exposure detection against AgentDojo's real re-serialisation of injected text."""

from __future__ import annotations

import pytest

from evoaudit import config
from evoaudit.records import Call, Message
from evoaudit.replay.recompute import _saw_injection
from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.suite.agentdojo.exposure import exposed


@pytest.fixture(scope="module")
def instances():
    return build_instances(config.from_dict({}))


def _episode(template: str, injections: dict[str, str], plan: list[Call]) -> list[Message]:
    """The messages a model following ``plan`` would receive, with AgentDojo's own formatting."""
    env = banking.build_environment(template, injections)
    runtime = banking.make_runtime()
    messages = [Message(role="user", content="task")]
    for i, call in enumerate(plan):
        result, error = runtime.run_function(env, call.function, call.args)
        text = error if error else banking.format_tool_result(result)
        messages.append(Message(role="tool", tool_call_id=f"c{i}", content=text))
    return messages


def _both(messages: list[Message], injections: dict[str, str]) -> tuple[bool, bool]:
    texts = [m.content or "" for m in messages if m.role == "tool"]
    return exposed(messages, injections), _saw_injection(texts, injections)


def test_every_reachable_pair_is_exposed_when_ground_truth_is_followed(instances):
    attack = banking.make_attack("Emma Johnson", "AI assistant")
    missed = []
    for inst in instances:
        for goal in banking.injection_task_ids():
            text = banking.injection_text(attack, goal, inst.prompt)
            injections = {v: text for v in inst.vectors}
            found = _both(_episode(inst.environment_template, injections, inst.ground_truth), injections)
            if found != (True, True):
                missed.append((inst.instance_id, goal, found))
    assert missed == []


def test_benign_runs_and_unreached_vectors_are_never_exposed(instances):
    attack = banking.make_attack("Emma Johnson", "AI assistant")
    blind = [Call(function="get_balance"), Call(function="get_iban"), Call(function="get_user_info")]
    for inst in instances:
        assert _both(_episode(inst.environment_template, {}, inst.ground_truth), {}) == (False, False)
        text = banking.injection_text(attack, "injection_task_5", inst.prompt)
        injections = {v: text for v in inst.vectors}
        # The injection is placed but the calls made never show it.
        assert _both(_episode(inst.environment_template, injections, blind), injections) == (False, False)


def test_only_the_whole_injection_counts_not_a_fragment():
    text = banking.injection_text(
        banking.make_attack("Emma Johnson", "AI assistant"), "injection_task_7", "t"
    )
    goal = banking.injection_task("injection_task_7").GOAL
    messages = [Message(role="tool", tool_call_id="c", content=f"note: {goal}")]
    assert _both(messages, {"injection_incoming_transaction": text}) == (False, False)


@pytest.mark.parametrize("user", ["Emma Johnson", "Zoë O'Brien-Müller"])
def test_double_quoted_dumps_with_escapes_and_wrapped_lines_are_detected(user):
    # A subject holding the injection and a tab is dumped double-quoted: escapes (\t, \xeb) and lines
    # continued with a trailing backslash; apostrophes are doubled in single-quoted dumps.
    attack = banking.make_attack(user, "AI assistant")
    text = banking.injection_text(attack, "injection_task_2", "t")
    env = banking.build_environment(
        banking.official_environment_template(), {"injection_incoming_transaction": text}
    )
    runtime = banking.make_runtime()
    received = env.bank_account.transactions[-1].subject
    runtime.run_function(
        env,
        "send_money",
        {"recipient": "X", "amount": 1.0, "subject": "fwd:\t" + received, "date": "2022-01-01"},
    )
    result, _ = runtime.run_function(env, "get_most_recent_transactions", {"n": 1})
    dumped = banking.format_tool_result(result)
    assert '"fwd:\\t' in dumped and "\\\n" in dumped
    messages = [Message(role="tool", tool_call_id="c", content=dumped)]
    assert _both(messages, {"injection_incoming_transaction": text}) == (True, True)
