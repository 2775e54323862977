"""``agent.profile: agentdojo``: evoaudit's executor as AgentDojo's own runner talks to a model.

Against a scripted loopback server (AgentDojo's ground-truth agent with native tool calls), AgentDojo's own
benchmark function and evoaudit's static condition send byte-equal request bodies (as JSON values) turn by
turn and get the same per-pair utility and security. The default profile is what it was: the key is left
out of every dump, so config hashes and resume keys do not move. The same comparison against a real model
is ``tests/test_agentdojo_parity.py`` (slow).
"""

from __future__ import annotations

import pytest
from agentdojo_parity_kit import compare_pair, logging_proxy, scripted_server

from evoaudit import config as config_mod
from evoaudit.agent.profile import configured_prompt
from evoaudit.config import ConfigError
from evoaudit.evaluate import resume
from evoaudit.replay.recompute import replay_rollout
from evoaudit.suite.registry import get_suite

PAIRS = [
    ("user_task_0", "injection_task_0"),
    ("user_task_3", "injection_task_4"),
    ("user_task_12", "injection_task_3"),
]


@pytest.fixture(scope="module")
def scripted_runs():
    with scripted_server() as upstream, logging_proxy(upstream) as (base, proxy):
        yield [compare_pair(base, proxy, user_task, goal, max_steps=8) for user_task, goal in PAIRS]


def test_agentdojo_runner_and_the_profile_send_the_same_requests(scripted_runs):
    for run in scripted_runs:
        assert run["agentdojo"]["requests"] == run["evoaudit"]["requests"] > 1, run
        assert run["body_diffs"] == [], run
        assert run["calls"], run  # tool calls made the round trip


def test_agentdojo_runner_and_the_profile_agree_per_pair(scripted_runs):
    for run in scripted_runs:
        a, e = run["agentdojo"], run["evoaudit"]
        assert (a["utility"], a["security"]) == (e["utility"], e["security"]), run
    # The scripted agent does the user's task and ignores the injection.
    assert all(r["evoaudit"]["utility"] and not r["evoaudit"]["security"] for r in scripted_runs)


def test_a_final_message_without_content_runs_the_task_again_as_agentdojo_does():
    with scripted_server(final_content=False) as upstream, logging_proxy(upstream) as (base, proxy):
        run = compare_pair(base, proxy, "user_task_3", "injection_task_4", max_steps=8)
    # Three runs of (two calls, then the answer without content), on the environment each run left.
    assert run["agentdojo"]["requests"] == run["evoaudit"]["requests"] == 9, run
    assert run["body_diffs"] == [] and len(run["calls"]) == 6, run
    a, e = run["agentdojo"], run["evoaudit"]
    assert (a["utility"], a["security"]) == (e["utility"], e["security"]), run


def test_the_last_turns_calls_are_left_unexecuted_as_agentdojo_does_and_replay_agrees(scripted_runs):
    with scripted_server() as upstream, logging_proxy(upstream) as (base, proxy):
        # user_task_3 needs two calls: with two model turns the second turn's call is never made, and that
        # turn (a call, no content) is a final message without content: three runs in all.
        run = compare_pair(base, proxy, "user_task_3", "injection_task_4", max_steps=2)
    assert run["agentdojo"]["requests"] == run["evoaudit"]["requests"] == 6, run
    assert run["body_diffs"] == [] and run["calls"] == ["get_most_recent_transactions"] * 3, run
    a, e = run["agentdojo"], run["evoaudit"]
    assert (a["utility"], a["security"]) == (e["utility"], e["security"]) == (False, False), run
    assert run["rollout"].outcome.step_limit_hit
    # Independent replay reads the unanswered call as not executed, and the last turn's text as the output.
    for r in [run, *scripted_runs]:
        rollout = r["rollout"]
        instance = get_suite("banking").official_instances([rollout.family])[0]
        assert replay_rollout(rollout, instance).mismatches == {}, r["pair"]


def test_the_default_profile_is_left_out_of_every_dump_and_hash():
    default = config_mod.from_dict({})
    named = config_mod.from_dict({"agent": {"profile": "default"}})
    assert "profile" not in default.model_dump()["agent"]
    assert default.sha256() == named.sha256()
    assert resume.config_sections_sha256(default) == resume.config_sections_sha256(named)
    other = config_mod.from_dict({"agent": {"profile": "agentdojo"}})
    assert other.model_dump()["agent"]["profile"] == "agentdojo" and other.sha256() != default.sha256()
    assert config_mod.from_dict(other.full_dump()).agent.profile == "agentdojo"


def test_the_profile_starts_from_agentdojos_own_system_message():
    from agentdojo.agent_pipeline.agent_pipeline import load_system_message

    cfg = config_mod.from_dict({"agent": {"profile": "agentdojo"}})
    assert configured_prompt(cfg) == load_system_message(None)  # verbatim, trailing newline included
    assert configured_prompt(cfg, [("Skill", "check twice")]).endswith("## Skill\n\ncheck twice")
    assert configured_prompt(config_mod.from_dict({})) == config_mod.from_dict({}).agent.system_prompt


def test_the_profile_reads_native_calls_only_and_is_banking_only():
    with pytest.raises(ConfigError, match="parse_text_tool_calls"):
        config_mod.from_dict(
            {"agent": {"profile": "agentdojo"}, "executor": {"wire": {"parse_text_tool_calls": True}}}
        )
    with pytest.raises(ConfigError, match="agent.profile"):
        config_mod.from_dict(
            {
                "agent": {"profile": "agentdojo"},
                "suite": {"name": "apex", "goals": ["c1"]},
                "methods_params": {"placebo": {"goals": ["c1"]}},
                "transfer": {"enabled": False},
            }
        )
    assert get_suite("banking").agent_profile("default") is None


def test_the_profile_executes_a_call_as_agentdojos_tool_executor_does():
    profile = get_suite("banking").agent_profile("agentdojo")
    assert profile.prepare_call("no_such_tool", {"a": "[1]"}) == (
        {"a": "[1]"},
        "Invalid tool no_such_tool provided.",
    )
    args, refusal = profile.prepare_call("send_money", {"recipient": "x", "amount": 1, "subject": "[1, 2]"})
    assert refusal is None and args["subject"] == [1, 2]
