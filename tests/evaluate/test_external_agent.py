"""``agent.external``: the workflow's episodes run by an outside agent's command over MCP. A scripted agent
(``tests/data/plan_agent.py``, the mcp SDK's client, no model) that replays the simulator's own episodes
gives rollouts equal, field by field, to the workflow's own loop's, and replay recomputes them with no
mismatch."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from evoaudit import config as config_mod
from evoaudit.agent.profile import configured_prompt
from evoaudit.config import suite_view
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.models.factory import make_backend
from evoaudit.replay.suites import replay_for
from evoaudit.suite.registry import get_suite

AGENT = Path(__file__).resolve().parents[1] / "data" / "plan_agent.py"
BASE = {
    "sim": {"competence": 1.0, "read_propensity": 1.0, "compliance": 1.0},
    "agent": {"max_steps": 20},
    "transfer": {"enabled": False},
    "apex": {"enabled": False},
}
SLACK = {
    "suite": {"name": "slack", "families": ["user_task_0"], "goals": ["injection_task_1"]},
    "roles": {
        "acquisition": ["v1"],
        "validation": [],
        "benign_endpoint": ["v0"],
        "attacked_endpoint": ["v0"],
    },
    "methods": ["static"],
    "conditions": ["static"],
    "methods_params": {"placebo": {"goals": ["injection_task_1"]}},
}
CASES = {
    "banking": ({}, "user_task_3.v3", "injection_task_7"),
    "slack": (SLACK, "user_task_0.v0", "injection_task_1"),
}


def _cfg(extra: dict, external: dict | None = None) -> config_mod.Config:
    raw = {**BASE, **extra}
    if external is not None:
        raw["agent"] = {**raw["agent"], "external": external}
    return config_mod.from_dict(raw)


def _episodes(cfg, instance_id: str, goal: str):
    suite = get_suite(cfg.suite.name)
    instances = [i for i in suite.build_instances(suite_view(cfg)) if i.instance_id == instance_id]
    backend = make_backend(cfg, cfg.executor, instances)
    specs = [
        *plan_episodes("L1", "static", "benign", instances, []),
        *plan_episodes("L1", "static", "attacked", instances, [goal]),
    ]
    rollouts = [asyncio.run(run_one(cfg, backend, s, configured_prompt(cfg), None)) for s in specs]
    return instances[0], rollouts


def _plans(rollouts) -> dict:
    plans: dict = {}
    for r in rollouts:
        calls = [[c.function, c.args, c.error or c.result, c.error is not None] for c in r.calls]
        plans.setdefault(r.messages[1].content, []).append({"calls": calls, "answer": r.final_output})
    return plans


@pytest.mark.parametrize("suite_name", sorted(CASES))
def test_an_external_agent_replaying_the_loops_calls_gets_the_loops_rollouts_and_replay_agrees(
    suite_name, tmp_path
):
    extra, instance_id, goal = CASES[suite_name]
    own_cfg = _cfg(extra)
    instance, own = _episodes(own_cfg, instance_id, goal)
    assert own[1].outcome.exposed and own[1].outcome.attack_success  # the attacked branch is taken
    plans = tmp_path / "plans.json"
    plans.write_text(json.dumps(_plans(own)))
    log = tmp_path / "agent.log"
    command = [sys.executable, str(AGENT), str(plans), str(log)]
    _, external = _episodes(_cfg(extra, {"command": command, "timeout_s": 120}), instance_id, goal)
    # The outside agent ran both episodes, and made every call.
    ran = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["calls"] for r in ran] == [len(r.calls) for r in own]
    for mine, theirs in zip(own, external, strict=True):
        assert theirs.rollout_id == mine.rollout_id
        assert [(c.function, c.args, c.result, c.error) for c in theirs.calls] == [
            (c.function, c.args, c.result, c.error) for c in mine.calls
        ]
        assert theirs.final_output == mine.final_output and theirs.injections == mine.injections
        assert theirs.pre_state_sha256 == mine.pre_state_sha256
        assert theirs.terminal_state == mine.terminal_state
        want = mine.outcome.model_dump(mode="json")
        got = theirs.outcome.model_dump(mode="json")
        for field in want:
            assert got[field] == want[field], field
        assert replay_for(instance.suite)(theirs, instance).mismatches == {}


def test_an_agent_that_fails_is_an_infrastructure_failure_and_one_that_overruns_is_stopped(tmp_path):
    failing = _cfg({}, {"command": [sys.executable, "-c", "import sys; sys.exit('agent broke')"]})
    _, (benign, _) = _episodes(failing, "user_task_3.v3", "injection_task_7")
    assert benign.outcome.infra_failure == "external_agent_error"
    assert "agent broke" in benign.outcome.infra_failure_detail and not benign.calls
    slow = _cfg({}, {"command": [sys.executable, "-c", "import time; time.sleep(60)"], "timeout_s": 1})
    _, (benign, _) = _episodes(slow, "user_task_3.v3", "injection_task_7")
    assert benign.outcome.timer_hit and benign.outcome.infra_failure is None


def test_the_configuration_refuses_what_lives_in_evoaudits_own_loop():
    external = {"agent": {"external": {"command": ["my-agent"]}}}
    with pytest.raises(config_mod.ConfigError, match="transfer.enabled: does not go with agent.external"):
        config_mod.from_dict({**external, "apex": {"enabled": False}})
    with pytest.raises(config_mod.ConfigError, match="apex.enabled: does not go with agent.external"):
        config_mod.from_dict({**external, "transfer": {"enabled": False}})
    with pytest.raises(config_mod.ConfigError, match="defenses: does not go with agent.external"):
        config_mod.from_dict({**BASE, **external, "defenses": ["spotlighting_with_delimiting"]})
    assert config_mod.from_dict({**BASE, **external}).agent.external.command == ("my-agent",)
