"""The fast paths give exactly what AgentDojo's own code gives."""

from __future__ import annotations

import datetime
import random
import sys

import pytest
import yaml
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.default_suites.v1.tools.banking_client import Transaction

from evoaudit.suite.agentdojo import toolkit
from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.instances import build_instances

pytestmark = pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML built without libyaml")


def _episodes(cfg):
    """(instance, injections) for v0 and v3 of every family, benign and under every goal."""
    attack = banking.make_attack(cfg.suite.attack.user_name, cfg.suite.attack.model_name)
    for inst in (i for i in build_instances(cfg) if i.variant in ("v0", "v3")):
        yield inst, {}
        for goal in banking.injection_task_ids():
            yield inst, {v: banking.injection_text(attack, goal, inst.prompt) for v in inst.vectors}


def test_environments_parsed_with_libyaml_match_the_pure_python_loader(cfg):
    checked = 0
    for inst, injections in _episodes(cfg):
        fast = banking.build_environment(inst.environment_template, injections)
        overrides, body = banking.split_template(inst.environment_template)
        text = body.format(**(banking.vector_defaults() | overrides | injections))
        slow = banking.BankingEnvironment.model_validate(yaml.load(text, Loader=yaml.SafeLoader))
        assert fast.model_dump() == slow.model_dump()
        checked += 1
    assert checked == 30 * 10


def test_an_episode_that_changes_its_environment_leaves_the_next_build_untouched(cfg):
    inst = next(i for i in build_instances(cfg) if i.variant == "v0")
    fresh = banking.build_environment(inst.environment_template).model_dump()
    env = banking.build_environment(inst.environment_template)
    runtime = banking.make_runtime()
    _, error = runtime.run_function(
        env, "send_money", {"recipient": "X1", "amount": 5.0, "subject": "s", "date": "2022-01-01"}
    )
    assert error is None
    _, error = runtime.run_function(env, "update_password", {"password": "changed"})
    assert error is None
    env.bank_account.transactions[0].amount = -1.0
    env.user_account.first_name = "changed"
    assert env.model_dump() != fresh
    assert banking.build_environment(inst.environment_template).model_dump() == fresh


def test_agentdojo_pipeline_package_loads_in_full_on_first_use():
    import agentdojo.agent_pipeline as pipeline

    # The deferred package still provides every name its real __init__ defines.
    assert pipeline.AgentPipeline.__name__ == "AgentPipeline"
    assert "agentdojo.agent_pipeline.agent_pipeline" in sys.modules


def test_tool_results_are_agentdojos_text_byte_for_byte(cfg):
    checked = 0
    for inst, injections in _episodes(cfg):
        env = banking.build_environment(inst.environment_template, injections)
        runtime = banking.make_runtime()
        for call in inst.ground_truth:
            result, _ = runtime.run_function(env, call.function, call.args)
            assert banking.format_tool_result(result) == tool_result_to_str(result)
            checked += 1
    assert checked > 500


def test_tool_results_with_arbitrary_text_are_agentdojos_text_byte_for_byte():
    rng = random.Random(7)
    alphabet = list("abcdefghij ABC0123456789.,:;-_!?'\"#&*{}[]|>%@`\n\t\\/") + ["é", "€", "\u00a0", "\n\n"]
    for i in range(1500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.choice([5, 40, 90, 300])))
        rows = [
            Transaction(
                id=i, sender="me", recipient="X", amount=1.5, subject=text, date="2022-01-01", recurring=False
            ),
            Transaction(
                id=i + 1,
                sender="me",
                recipient="Y",
                amount=2.0,
                subject="Rent",
                date="2022-02-01",
                recurring=True,
            ),
        ]
        for result in (rows, rows[0], text, {"message": text}):
            assert banking.format_tool_result(result) == tool_result_to_str(result)


def test_a_repeated_plain_result_is_formatted_once_and_others_each_time(monkeypatch):
    made: list[object] = []
    real = toolkit._dump_afresh
    monkeypatch.setattr(toolkit, "_dump_afresh", lambda data: made.append(data) or real(data))
    monkeypatch.setattr(toolkit, "_DUMPED", {})
    rows = [{"id": 1, "amount": 5.0, "subject": "Rent"}, {"id": 2, "amount": 5, "subject": "5"}]
    first = toolkit._dump(rows)
    assert toolkit._dump([dict(r) for r in rows]) == first == yaml.safe_dump(rows)
    assert len(made) == 1
    # Values YAML writes differently are told apart: an int for a float, a number for its text, a bool.
    for other in (
        [{"id": 1, "amount": 5, "subject": "Rent"}, {"id": 2, "amount": 5, "subject": "5"}],
        [{"id": 1, "amount": 5.0, "subject": "Rent"}, {"id": 2, "amount": 5, "subject": 5}],
        [{"id": True, "amount": 5.0, "subject": "Rent"}, {"id": 2, "amount": 5, "subject": "5"}],
    ):
        assert toolkit._dump(other) == yaml.safe_dump(other) != first
    assert len(made) == 4
    # Data that is not plain (a date) is formatted afresh every time.
    dated = [{"day": datetime.date(2024, 5, 15)}]
    assert toolkit._dump(dated) == toolkit._dump(dated) == yaml.safe_dump(dated)
    assert len(made) == 6


def test_the_kept_texts_are_bounded(monkeypatch):
    monkeypatch.setattr(toolkit, "_DUMPED", {})
    monkeypatch.setattr(toolkit, "_DUMPED_MAX", 3)
    for n in range(10):
        assert toolkit._dump({"n": n}) == yaml.safe_dump({"n": n})
    assert list(toolkit._DUMPED) == [repr({"n": n}) for n in (7, 8, 9)]


def test_task_lookups_give_agentdojos_own_task_objects_without_rebuilding_its_table(monkeypatch):
    import agentdojo.task_suite.task_suite as agentdojo_task_suite

    suite = banking.load_suite()
    for family in banking.user_task_ids():
        assert banking.user_task(family) is suite.get_user_task_by_id(family)
    for goal in banking.injection_task_ids():
        assert banking.injection_task(goal) is suite.get_injection_task_by_id(goal)
    rebuilt: list[object] = []
    real = agentdojo_task_suite.get_version_compatible_items
    monkeypatch.setattr(
        agentdojo_task_suite, "get_version_compatible_items", lambda *a: rebuilt.append(a) or real(*a)
    )
    for _ in range(3):
        banking.user_task("user_task_0"), banking.injection_task("injection_task_0")
    assert rebuilt == []
