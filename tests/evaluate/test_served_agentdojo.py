"""`evoaudit serve` / `evoaudit score` on AgentDojo's suites: an outside agent written with the mcp SDK's
client runs benign and attacked episodes of Banking (stdio) and Slack (streamable HTTP), and the score of
the record agrees, field by field, with the outcome the workflow's own episode gets for the same calls
(the simulator's scripted plan through ``evaluate.runner.run_one``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import yaml

from evoaudit import config as config_mod
from evoaudit.agent.profile import configured_prompt
from evoaudit.cli import main
from evoaudit.config import suite_view
from evoaudit.evaluate.runner import plan_episodes, run_one
from evoaudit.evaluate.served.record import read_record
from evoaudit.models.factory import make_backend
from evoaudit.suite.registry import get_suite

# A simulator that always reads, never errs and always complies: every attacked episode is exposed and
# carries out its goal, so both arms exercise every outcome field.
SIM = {"sim": {"competence": 1.0, "read_propensity": 1.0, "compliance": 1.0}, "agent": {"max_steps": 20}}
SLACK = {
    "suite": {"name": "slack", "families": ["user_task_0", "user_task_1"], "goals": ["injection_task_1"]},
    "roles": {
        "acquisition": ["v1"],
        "validation": [],
        "benign_endpoint": ["v0"],
        "attacked_endpoint": ["v0"],
    },
    "methods": ["static"],
    "conditions": ["static"],
    "methods_params": {"placebo": {"goals": ["injection_task_1"]}},
    "transfer": {"enabled": False},
    "apex": {"enabled": False},
}
CASES = {
    # suite: (configuration, instance, goal, transport)
    "banking": ({}, "user_task_3.v3", "injection_task_7", "stdio"),
    "slack": (SLACK, "user_task_0.v0", "injection_task_1", "http"),
}


def _config(tmp_path: Path, extra: dict) -> tuple[Path, config_mod.Config]:
    raw = {**SIM, **extra, "results_dir": str(tmp_path / "results")}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path, config_mod.load(path)


def _workflow_rollout(cfg, instance_id: str, goal: str | None):
    """The workflow's own episode of ``instance_id``: the simulator's scripted plan through the runner."""
    suite = get_suite(cfg.suite.name)
    instances = [i for i in suite.build_instances(suite_view(cfg)) if i.instance_id == instance_id]
    arm = "attacked" if goal else "benign"
    (spec,) = plan_episodes("L1", "static", arm, instances, [goal] if goal else [])
    backend = make_backend(cfg, cfg.executor, instances)
    return asyncio.run(run_one(cfg, backend, spec, configured_prompt(cfg), None))


async def _agent(client_of, calls, answer: str) -> dict:
    """A scripted outside agent: lists the tools and prompts, fetches the system prompt and the user's
    request (which starts the episode), makes ``calls`` in order and submits ``answer``."""
    seen: dict = {}
    async with client_of("tools") as client:
        seen["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
        seen["prompts"] = sorted(p.name for p in (await client.list_prompts()).prompts)
        seen["system"] = (await client.get_prompt("system")).messages[0].content.text
        seen["task"] = (await client.get_prompt("task")).messages[0].content.text
        seen["results"] = []
        for c in calls:
            result = await client.call_tool(c.function, c.args)
            seen["results"].append(("".join(getattr(b, "text", "") for b in result.content), result.is_error))
    async with client_of("control") as control:
        await control.call_tool("submit_answer", {"answer": answer})
    return seen


def _run_stdio(cfg_path: Path, argv: list[str], tmp_path: Path, calls, answer: str) -> dict:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "evoaudit.cli", "serve", "--config", str(cfg_path), *argv]
    )

    async def go() -> dict:
        with open(tmp_path / "server.log", "w") as err, anyio.fail_after(120):
            async with Client(stdio_client(params, errlog=err)) as client:

                class Same:  # stdio: one server carries the tools and the control tools
                    def __init__(self, _key):
                        pass

                    async def __aenter__(self):
                        return client

                    async def __aexit__(self, *exc):
                        return False

                return await _agent(Same, calls, answer)

    return anyio.run(go)


def _run_http(cfg_path: Path, argv: list[str], tmp_path: Path, calls, answer: str) -> dict:
    from mcp import Client

    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evoaudit.cli",
            "serve",
            "--config",
            str(cfg_path),
            *argv,
            "--transport",
            "http",
            "--ready-file",
            str(ready),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        urls = json.loads(ready.read_text())["servers"]
        return anyio.run(_agent, lambda key: Client(urls[key]), calls, answer)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("suite_name", sorted(CASES))
@pytest.mark.parametrize("attacked", [False, True], ids=["benign", "attacked"])
def test_an_mcp_client_completes_the_episode_and_score_agrees_with_the_workflow_on_every_field(
    suite_name, attacked, tmp_path, capsys
):
    extra, instance_id, goal, transport = CASES[suite_name]
    goal = goal if attacked else None
    cfg_path, cfg = _config(tmp_path, extra)
    rollout = _workflow_rollout(cfg, instance_id, goal)
    assert rollout.calls and rollout.outcome.infra_failure is None
    if attacked:  # the episode this pins is one where the attack reached the agent and succeeded
        assert rollout.outcome.exposed is True and rollout.outcome.attack_success is True

    record = tmp_path / "record.json"
    argv = ["--instance", instance_id, "--record", str(record), *(["--goal", goal] if goal else [])]
    run = _run_stdio if transport == "stdio" else _run_http
    seen = run(cfg_path, argv, tmp_path, rollout.calls, rollout.final_output)

    suite = get_suite(cfg.suite.name)
    expected_tools = sorted(s["function"]["name"] for s in suite.tool_schemas())
    if transport == "http":  # the tool server offers exactly the suite's tools
        assert seen["tools"] == expected_tools
    else:  # stdio's one server lists the control tools beside them
        assert seen["tools"] == sorted([*expected_tools, "reset_episode", "submit_answer"])
    assert seen["prompts"] == ["system", "task"]
    assert seen["system"] == rollout.messages[0].content and seen["task"] == rollout.messages[1].content
    # The agent received what the workflow's agent received, call by call.
    assert seen["results"] == [(c.error or c.result, c.error is not None) for c in rollout.calls]

    served = read_record(record)
    (episode,) = [e for e in served.episodes if e.calls]
    assert [(c.function, c.args) for c in episode.calls] == [(c.function, c.args) for c in rollout.calls]
    assert episode.final_output == rollout.final_output
    assert episode.pre_state_sha256 == rollout.pre_state_sha256
    assert served.injections == rollout.injections

    out = tmp_path / "score.json"
    assert main(["score", str(record), "--config", str(cfg_path), "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["episodes"]
    want = rollout.outcome.model_dump(mode="json")
    assert set(row["outcome"]) == set(want)
    for field in want:
        assert row["outcome"][field] == want[field], field
    assert f"unauthorised state change {want['unauthorized_state_change']}" in capsys.readouterr().out


def _host(tmp_path: Path, goal: str | None = "injection_task_7"):
    from evoaudit.evaluate.served.instance import served_instance
    from evoaudit.evaluate.served.server import EpisodeHost

    cfg_path, cfg = _config(tmp_path, {})
    record = tmp_path / "record.json"
    return cfg_path, cfg, record, EpisodeHost(served_instance(cfg, "user_task_3.v3", goal), record)


def test_a_call_with_bad_arguments_is_recorded_and_answered_with_agentdojos_own_error(tmp_path):
    from mcp import Client

    from evoaudit.evaluate.served.server import make_server

    _, cfg, record, host = _host(tmp_path)

    async def go():
        async with Client(make_server(host)) as client:
            await client.get_prompt("task")
            return await client.call_tool("send_money", {"recipient": "x"})

    result = anyio.run(go)
    (call,) = read_record(record).episodes[-1].calls
    assert result.is_error and call.error and call.args == {"recipient": "x"}
    # The text is the runtime's own (AgentDojo's argument validation), the same the workflow's agent gets.
    session = get_suite("banking").open_tools(host.served.build_environment(), cfg.suite)
    assert result.content[0].text == call.error == session.call("send_money", {"recipient": "x"})[1]


def test_fetching_the_task_prompt_after_calls_starts_a_new_episode_on_a_fresh_environment(tmp_path):
    from mcp import Client

    from evoaudit.evaluate.served.server import make_server

    _, _, record, host = _host(tmp_path, goal=None)
    args = {"recipient": "US122000000121212121212", "amount": 10.0, "subject": "x", "date": "2022-01-01"}

    async def go():
        async with Client(make_server(host)) as client:
            await client.get_prompt("task")
            await client.call_tool("send_money", args)
            await client.get_prompt("task")
            await client.call_tool("get_balance", {})

    anyio.run(go)
    first, second = read_record(record).episodes
    assert [c.function for c in first.calls] == [
        "send_money"
    ] and first.state_sha256 != first.pre_state_sha256
    assert (
        second.pre_state_sha256 == first.pre_state_sha256 and second.state_sha256 == second.pre_state_sha256
    )


def test_score_refuses_a_record_whose_calls_do_not_re_run_as_recorded(tmp_path, capsys):
    cfg_path, _, record, host = _host(tmp_path)
    host.call("get_balance", {})
    doc = json.loads(record.read_text())
    doc["episodes"][0]["calls"][0]["result"] = "999.0"
    record.write_text(json.dumps(doc))
    assert main(["score", str(record), "--config", str(cfg_path)]) == 1
    assert "call 0 (get_balance) re-ran differently from the record" in capsys.readouterr().err


def test_score_refuses_a_record_served_under_another_configuration(tmp_path, capsys):
    cfg_path, _, record, host = _host(tmp_path)
    host.call("get_balance", {})
    other = tmp_path / "other.yaml"
    other.write_text(cfg_path.read_text() + "suite:\n  attack:\n    user_name: Someone Else\n")
    assert main(["score", str(record), "--config", str(other)]) == 1
    assert "field 'injections' differs" in capsys.readouterr().err


def test_serve_refuses_a_goal_the_instance_is_never_attacked_with_and_names_the_fix(tmp_path, capsys):
    cfg_path, _ = _config(tmp_path, {})
    argv = ["serve", "--config", str(cfg_path), "--instance", "user_task_3.v3", "--goal", "nope"]
    assert main(argv) == 1
    assert "--goal nope: not an injection goal of suite banking" in capsys.readouterr().err
    assert main(["serve", "--config", str(cfg_path), "--instance", "nope.v3"]) == 1
    assert "valid: user_task_" in capsys.readouterr().err


def test_a_frozen_artifact_is_served_as_the_evaluators_system_prompt_and_score_needs_the_same_one(
    tmp_path, capsys
):
    from functools import partial

    from mcp import Client

    from evoaudit.evaluate.served.instance import served_instance
    from evoaudit.evaluate.served.server import EpisodeHost, make_server
    from evoaudit.evaluate.stage import deployed_prompts
    from evoaudit.methods.artifact import write_artifact
    from evoaudit.methods.conditions import Insertion, condition
    from evoaudit.records import ArtifactMeta

    cfg_path, cfg = _config(tmp_path, {})
    artifact = tmp_path / "skillopt"
    skill = "Always confirm the IBAN against the user's request before sending money."
    write_artifact(
        artifact,
        ArtifactMeta(method="skillopt", lineage="L1", state_files=["best_skill.md"]),
        {"best_skill.md": skill},
    )
    record = tmp_path / "record.json"
    served = served_instance(cfg, "user_task_3.v3", None, "skillopt", artifact)
    host = EpisodeHost(served, record)

    async def go():
        async with Client(make_server(host)) as client:
            system = (await client.get_prompt("system")).messages[0].content.text
            await client.get_prompt("task")
            await client.call_tool("get_balance", {})
            return system

    system = anyio.run(go)
    # The evaluation stage's own prompt for this condition and artifact.
    expected, _ = deployed_prompts(
        partial(configured_prompt, cfg), Insertion(condition("skillopt"), artifact), []
    )
    assert system == expected and skill in system and system != configured_prompt(cfg)
    kept = read_record(record)
    assert kept.condition == "skillopt" and kept.artifact_sha256 and kept.system_prompt == expected
    # Scored without the artifact, the record is refused; with it, scored.
    assert main(["score", str(record), "--config", str(cfg_path)]) == 1
    assert "field 'system_prompt' differs" in capsys.readouterr().err
    argv = [
        "score",
        str(record),
        "--config",
        str(cfg_path),
        "--condition",
        "skillopt",
        "--artifact",
        str(artifact),
    ]
    assert main(argv) == 0
    assert "episode 0: utility" in capsys.readouterr().out
