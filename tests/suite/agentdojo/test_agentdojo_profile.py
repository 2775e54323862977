"""``agent.profile: agentdojo``: evoaudit's executor as AgentDojo's own runner talks to a model.

Against a scripted loopback server (AgentDojo's ground-truth agent with native tool calls), AgentDojo's own
benchmark function and evoaudit's static condition send byte-equal request bodies (as JSON values) turn by
turn and get the same per-pair utility and security. The default profile is what it was: the key is left
out of every dump, so config hashes and resume keys do not move. The same comparison against a real model
is ``tests/suite/agentdojo/test_agentdojo_parity.py`` (slow).
"""

from __future__ import annotations

import pytest
from agentdojo_parity_kit import compare_pair, logging_proxy, run_evoaudit, scripted_server

from evoaudit import config as config_mod
from evoaudit.agent.profile import configured_prompt
from evoaudit.config import ConfigError, config_sha256, stage_digest
from evoaudit.records import Message, ToolCall
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
    # The server's ids repeat from run to run (call_0, call_1); the requests carry them as AgentDojo's do
    # (the bodies are equal, ids included), the record renames the repeats, and replay reads all three runs.
    rollout = run["rollout"]
    ids = [tc.id for m in rollout.messages for tc in m.tool_calls]
    assert len(ids) == len(set(ids)) == 6 and [c.call_id for c in rollout.calls] == ids
    assert replay_rollout(rollout, _instance(rollout)).mismatches == {}


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


# The least configuration the profile runs with: a real endpoint for the executor, no transfer check.
PROFILE = {
    "agent": {"profile": "agentdojo"},
    "executor": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
    "transfer": {"enabled": False},
}


def _profile_cfg(**executor):
    return config_mod.from_dict({**PROFILE, "executor": {**PROFILE["executor"], **executor}})


def test_the_default_profile_is_left_out_of_every_dump_and_hash():
    default = config_mod.from_dict({})
    named = config_mod.from_dict({"agent": {"profile": "default"}})
    assert "profile" not in default.model_dump()["agent"]
    assert config_sha256(default) == config_sha256(named)
    assert stage_digest(default, "episode") == stage_digest(named, "episode")
    other = _profile_cfg()
    plain = config_mod.from_dict({k: v for k, v in PROFILE.items() if k != "agent"})
    assert other.model_dump()["agent"]["profile"] == "agentdojo"
    assert config_sha256(other) != config_sha256(plain)
    assert config_mod.from_dict(other.full_dump()).agent.profile == "agentdojo"


def test_the_profile_starts_from_agentdojos_own_system_message():
    from agentdojo.agent_pipeline.agent_pipeline import load_system_message

    cfg = _profile_cfg()
    assert configured_prompt(cfg) == load_system_message(None)  # verbatim, trailing newline included
    assert configured_prompt(cfg, [("Skill", "check twice")]).endswith("## Skill\n\ncheck twice")
    assert configured_prompt(config_mod.from_dict({})) == config_mod.from_dict({}).agent.system_prompt


def test_the_profile_reads_native_calls_only_and_is_banking_only():
    with pytest.raises(ConfigError, match="parse_text_tool_calls"):
        _profile_cfg(wire={"parse_text_tool_calls": True})
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


@pytest.mark.parametrize(
    ("executor", "field"),
    [
        ({"max_tokens": 256}, "executor.max_tokens"),
        ({"send_seed": False}, "executor.send_seed"),
        ({"wire": {"tool_choice": "required"}}, "executor.wire.tool_choice"),
        ({"wire": {"tool_choice": None}}, "executor.wire.tool_choice"),
        ({"wire": {"assistant_content": "null"}}, "executor.wire.assistant_content"),
    ],
)
def test_settings_the_runners_requests_do_not_carry_are_refused_naming_the_field(executor, field):
    with pytest.raises(ConfigError, match=f"{field}: .* would be ignored under agent.profile 'agentdojo'"):
        _profile_cfg(**executor)
    # The same value is the user's to choose under the default profile.
    config_mod.from_dict(
        {k: v for k, v in PROFILE.items() if k != "agent"} | {"executor": {**PROFILE["executor"], **executor}}
    )


def test_the_profile_needs_a_real_endpoint_and_warns_that_temperature_0_is_not_sent(caplog):
    with pytest.raises(ConfigError, match="executor.backend: 'sim' does not go with agent.profile"):
        config_mod.from_dict({"agent": {"profile": "agentdojo"}, "transfer": {"enabled": False}})
    with pytest.raises(ConfigError, match="transfer.executor.backend: 'sim'"):
        config_mod.from_dict({**PROFILE, "transfer": {"enabled": True}})
    with caplog.at_level("WARNING", logger="evoaudit.config"):
        _profile_cfg(temperature=0.0)
    assert "executor.temperature 0 is not sent" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="evoaudit.config"):
        assert _profile_cfg(temperature=0.7).executor.temperature == 0.7
    assert "temperature" not in caplog.text


def _instance(rollout):
    return get_suite("banking").official_instances([rollout.family])[0]


def _scripted(first, max_steps=8, pair=("user_task_3", "injection_task_4")):
    with scripted_server(first=first) as upstream, logging_proxy(upstream) as (base, proxy):
        return compare_pair(base, proxy, *pair, max_steps=max_steps)


def test_an_unknown_tool_and_a_list_like_string_go_as_in_agentdojos_own_pipeline():
    # The server asks for a tool the suite lacks, then send_money with a subject that reads as a list.
    send = '{"recipient": "GB29NWBK60161331926819", "amount": 1, "subject": "[1, 2]", "date": "2022-01-01"}'
    run = _scripted([("no_such_tool", '{"a": "[1]"}'), ("send_money", send)])
    a, e = run["agentdojo"], run["evoaudit"]
    assert "raised" not in a and run["body_diffs"] == [], run  # AgentDojo's own requests, ids included
    assert a["requests"] == e["requests"] and (a["utility"], a["security"]) == (e["utility"], e["security"])
    rollout = run["rollout"]
    refused, converted = rollout.calls[0], rollout.calls[1]
    assert refused.error == "Invalid tool no_such_tool provided." and refused.args == {"a": "[1]"}
    assert converted.args["subject"] == [1, 2]  # ToolsExecutor's conversion, before the call
    # Replay executes the calls as the profile does: the refusal and the conversion, no mismatch.
    assert replay_rollout(rollout, _instance(rollout)).mismatches == {}


@pytest.mark.parametrize("arguments", ["null", "5", '"x"', "[1]", "{not json"])
def test_arguments_agentdojo_cannot_read_are_a_named_difference_not_a_harness_error(arguments):
    run = _scripted([("get_balance", arguments)])
    # AgentDojo's own client raises on them (json.loads, or FunctionCall's dict): its benchmark stops.
    assert "raised" in run["agentdojo"], run
    rollout = run["rollout"]
    assert rollout.outcome.infra_failure is None, rollout.outcome  # no harness_error either
    first = rollout.calls[0]
    if arguments.startswith("{"):  # not JSON: not executed, the model is told the decoder's error
        assert first.args is None and first.error.startswith("JSONDecodeError")
    else:  # JSON but not an object: executed as {}
        assert first.args == {} and first.error is None and first.result
    assert run["evoaudit"]["utility"]  # the episode went on to do the task
    assert replay_rollout(rollout, _instance(rollout)).mismatches == {}


def _inserted_send_money(rollout, at):
    """``rollout`` with an assistant turn asking for send_money, answered by nothing, put at ``at``."""
    call = ToolCall(
        id="hostile",
        name="send_money",
        arguments='{"recipient": "X", "amount": 9, "subject": "s", "date": "2022-01-01"}',
    )
    msgs = list(rollout.messages)
    msgs.insert(at, Message(role="assistant", content=None, tool_calls=[call]))
    return rollout.model_copy(update={"messages": msgs})


@pytest.mark.parametrize("profile", ["default", "agentdojo"])
def test_replay_flags_an_unanswered_send_money_inserted_mid_rollout(profile):
    with scripted_server() as upstream, logging_proxy(upstream) as (base, _):
        _, _, rollout = run_evoaudit(base, "user_task_3", "injection_task_4", 8, profile)
    assert (rollout.agent_profile, rollout.max_steps) == (
        (None, None) if profile == "default" else (profile, 8)
    )
    assert replay_rollout(rollout, _instance(rollout)).mismatches == {}
    # After the first tool result, before the next model turn; and as the very last message.
    tool_at = next(i for i, m in enumerate(rollout.messages) if m.role == "tool")
    for at in (tool_at + 1, len(rollout.messages) - 1):
        mismatches = replay_rollout(_inserted_send_money(rollout, at), _instance(rollout)).mismatches
        assert mismatches, (profile, at)
    # The final-output rule: a last message with calls and content is not the output of a run that did not
    # reach its turn limit.
    hostile = _inserted_send_money(rollout, len(rollout.messages))
    last = hostile.messages[-1].model_copy(update={"content": rollout.final_output})
    hostile = hostile.model_copy(update={"messages": [*hostile.messages[:-1], last]})
    assert replay_rollout(hostile, _instance(rollout)).mismatches, profile


def test_a_default_rollout_records_no_profile():
    with scripted_server() as upstream, logging_proxy(upstream) as (base, _):
        _, _, rollout = run_evoaudit(base, "user_task_0", "injection_task_0", 8, "default")
    dumped = rollout.model_dump_json()
    assert '"agent_profile"' not in dumped and '"max_steps"' not in dumped
