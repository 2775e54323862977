"""The fast paths give exactly what AgentDojo's own code gives."""

from __future__ import annotations

import sys

import pytest
import yaml

from evoaudit.suite import banking
from evoaudit.suite.instances import build_instances

pytestmark = pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML built without libyaml")


def test_environments_parsed_with_libyaml_match_the_pure_python_loader(cfg):
    attack = banking.make_attack(cfg.suite.attack.user_name, cfg.suite.attack.model_name)
    checked = 0
    for inst in (i for i in build_instances(cfg) if i.variant in ("v0", "v3")):
        for goal in [None, *banking.injection_task_ids()]:
            injections = {}
            if goal is not None:
                injections = {v: banking.injection_text(attack, goal, inst.prompt) for v in inst.vectors}
            fast = banking.build_environment(inst.environment_template, injections)
            overrides, body = banking.split_template(inst.environment_template)
            text = body.format(**(banking.vector_defaults() | overrides | injections))
            slow = banking.BankingEnvironment.model_validate(yaml.load(text, Loader=yaml.SafeLoader))
            assert fast.model_dump() == slow.model_dump()
            checked += 1
    assert checked == 30 * 10


def test_agentdojo_pipeline_package_loads_in_full_on_first_use():
    import agentdojo.agent_pipeline as pipeline

    # The deferred package still provides every name its real __init__ defines.
    assert pipeline.AgentPipeline.__name__ == "AgentPipeline"
    assert "agentdojo.agent_pipeline.agent_pipeline" in sys.modules
