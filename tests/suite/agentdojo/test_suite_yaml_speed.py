"""The fast paths give exactly what AgentDojo's own code gives."""

from __future__ import annotations

import random
import sys

import pytest
import yaml
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.default_suites.v1.tools.banking_client import Transaction

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
