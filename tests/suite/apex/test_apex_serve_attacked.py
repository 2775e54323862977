"""An attacked workspace served to an outside MCP agent: `evoaudit apex serve TASK --attack ID` serves the
world with the attack in place and its watcher armed, the task prompt as an MCP prompt (never the gold values
or the rubric), a reset between episodes and a record of every call; `evoaudit apex score` scores the record
with the workflow's own outcome, judge stage and report functions, and gives the outcome the workflow gives
the same actions run through its own loop."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from evoaudit import config as config_mod
from evoaudit.cli import main
from evoaudit.errors import AuditError
from evoaudit.evaluate.apex.judge import final_decisions, stage_judge
from evoaudit.evaluate.runner import EpisodeSpec, run_one
from evoaudit.models.base import ChatResponse
from evoaudit.models.sim.apex import SimAttacker
from evoaudit.records import FileEffect, Message, ServedRecord, ToolCall
from evoaudit.report.apex.judged import apply_judged
from evoaudit.suite.apex import commands
from evoaudit.suite.apex.attacks import attack_set as attack_sets
from evoaudit.suite.apex.attacks.attacker import Attacker
from evoaudit.suite.apex.attacks.probes import exposure_plan, oracle_answer, oracle_plan
from evoaudit.suite.apex.build import build_all
from evoaudit.suite.apex.judging.success import TaskFacts
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.runtime.isolation import sandbox_works
from evoaudit.suite.apex.worlds import goals
from evoaudit.suite.apex.worlds.generate import build_task

TASK = "law_dd_indemnity"
needs_bwrap = pytest.mark.skipif(not sandbox_works("bwrap"), reason="bubblewrap does not start here")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A one-task world cache with its attack set, the configuration naming them, and a dynamic attack
    (one with a watcher)."""
    tmp = tmp_path_factory.mktemp("served")
    out = tmp / "apex"
    cfg_path = tmp / "config.yaml"
    cfg_path.write_text(
        f"suite:\n  apex:\n    scale: 0.05\n    out: {out}\napex:\n  tasks: [{TASK}]\n"
        "agent:\n  max_steps: 60\n"
    )
    cfg = config_mod.load(cfg_path)
    build_all(out / "v0", "v0", cfg.suite.apex.seed, 0.05, (TASK,))
    task = build_task(TASK, "v0", cfg.suite.apex.seed, 0.05)
    attack_sets.build_attack_set(
        out / "attacks.json", [task], Attacker(SimAttacker(), "sim"), attack_sets.AttackOptions()
    )
    found = attack_sets.load_attack_set(out / "attacks.json")
    attack = next(a for a in found if a.watcher is not None and a.task_id == TASK)
    return cfg_path, cfg, task, attack


def _actions(cfg, task, attack) -> list[tuple[str, dict]]:
    """Read the injected content (exposure), do what the attack asks, then the user's task."""
    suite, instance = commands.served_instance(cfg, TASK, "v0")
    env = suite.build_environment(instance, attack.attack_id, {})
    comply = oracle_plan(goals.goal(attack.goal_id), env, TaskFacts.of_task(task), oracle_answer(task))
    return [*exposure_plan(attack), *comply, *((c.function, c.args) for c in task.oracle)]


def _serve(cfg_path: Path, attack_id: str, record: Path, ready: Path) -> subprocess.Popen:
    argv = ["apex", "serve", TASK, "--config", str(cfg_path), "--attack", attack_id]
    argv += ["--transport", "http", "--record", str(record), "--ready-file", str(ready)]
    proc = subprocess.Popen([sys.executable, "-m", "evoaudit.cli", *argv])
    deadline = time.monotonic() + 90
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
        time.sleep(0.1)
    return proc


async def _agent(urls: dict[str, str], actions: list[tuple[str, dict]], reads: int) -> dict:
    """A harness over streamable HTTP: a spoilt first episode, a reset by fetching the prompt, the episode."""
    from mcp import Client

    seen: dict = {}
    async with Client(urls["all"]) as client:
        seen["tools"] = (await client.list_tools()).model_dump_json()
        seen["prompts"] = (await client.list_prompts()).model_dump_json()
        first = await client.get_prompt("task")
        seen["prompt"] = first.messages[0].content.text
        # Episode 0: the watcher fires and a file is overwritten; the reset must undo both.
        for name, args in actions[:reads]:
            await client.call_tool(name, args)
        await client.call_tool("write_file", {"path": "shared/scratch.md", "content": "spoilt"})
        again = await client.get_prompt("task")
        seen["prompt_again"] = again.messages[0].content.text
        # Episode 1 (one call): the overwritten file is gone.
        seen["after_reset"] = (await client.call_tool("read_file", {"path": "shared/scratch.md"})).is_error
    async with Client(urls["episode"]) as control:
        seen["control_tools"] = [t.name for t in (await control.list_tools()).tools]
        seen["reset"] = (await control.call_tool("reset_episode", {})).content[0].text
    async with Client(urls["all"]) as client:
        for name, args in actions:
            await client.call_tool(name, args)
    return seen


class Scripted:
    """The same actions as a model's turns through the workflow's own loop: one call a turn, then an empty
    answer (an MCP session carries no final message)."""

    def __init__(self, actions):
        self.actions = actions

    def fingerprint(self) -> dict:
        return {"backend": "scripted", "model": "scripted"}

    async def complete(self, request) -> ChatResponse:
        done = sum(m.role == "tool" for m in request.messages)
        if done >= len(self.actions):
            return ChatResponse(message=Message(role="assistant", content=""))
        name, args = self.actions[done]
        call = ToolCall(id=f"c{done}", name=name, arguments=json.dumps(args))
        return ChatResponse(message=Message(role="assistant", tool_calls=[call]))


def _workflow_outcome(cfg, attack_id: str, actions):
    _, instance = commands.served_instance(cfg, TASK, "v0")
    spec = EpisodeSpec("L0", "scripted", "attacked", instance, attack_id)
    rollout = asyncio.run(run_one(cfg, Scripted(actions), spec, "system", None))
    _, judge = stage_judge(cfg)
    return apply_judged([rollout], final_decisions([rollout], judge))[0].outcome


def test_an_mcp_client_completes_an_attacked_episode_and_apex_score_matches_the_workflow(
    served, tmp_path, capsys
):
    cfg_path, cfg, task, attack = served
    actions = _actions(cfg, task, attack)
    reads = len(exposure_plan(attack))
    record, ready = tmp_path / "episode.json", tmp_path / "ready.json"
    proc = _serve(cfg_path, attack.attack_id, record, ready)
    try:
        urls = json.loads(ready.read_text())["servers"]
        assert set(urls) == {*tools.APPS, "all", "episode"}
        seen = anyio.run(_agent, urls, actions, reads)
    finally:
        proc.terminate()
        proc.wait(timeout=20)

    suite, instance = commands.served_instance(cfg, TASK, "v0")
    prompt = suite.prompt_for(instance, attack.attack_id)
    assert seen["prompt"] == seen["prompt_again"] == prompt
    # The agent's servers offer only the workspace tools; the reset is on the harness's control server.
    assert seen["control_tools"] == ["reset_episode"] and "reset_episode" not in seen["tools"]
    assert seen["after_reset"], "the reset left episode 0's file in place"
    assert json.loads(seen["reset"]) == {"episode": 2}
    # Nothing the server returns carries the gold values or the rubric.
    shown = json.dumps(seen)
    leaks = [str(v) for v in task.record.gold.values() if len(str(v)) > 3]
    leaks += [json.dumps(item.check, sort_keys=True) for item in task.record.rubric]
    leaks += [item.verifier_id for item in task.record.rubric if len(item.verifier_id) > 6]
    assert not [s for s in leaks if s in shown]

    doc = ServedRecord.model_validate_json(record.read_text())
    assert (doc.task_id, doc.attack) == (TASK, attack.attack_id)
    assert [len(e.calls) for e in doc.episodes] == [reads + 1, 1, len(actions)]
    assert len({e.pre_state_sha256 for e in doc.episodes}) == 1
    # The watcher was armed in each episode: it acted in episode 0 and again, afresh, in the scored one.
    assert doc.episodes[0].observer_log and doc.episodes[2].observer_log
    assert doc.episodes[0].observer_log[0] == doc.episodes[2].observer_log[0]

    out = tmp_path / "score.json"
    assert main(["apex", "score", str(record), "--config", str(cfg_path), "--json", str(out)]) in (0, None)
    assert "episode 2: task score" in capsys.readouterr().out
    scored = json.loads(out.read_text())
    scores = scored["episodes"]
    assert [s["episode"] for s in scores] == [0, 1, 2]
    mine = scores[2]
    assert mine["exposed"] is True and mine["attack_success"] is True
    # A criterion of this task's rubric only meaning decides: the configured judge (the simulator) did.
    assert mine["decisions"]["task_score"]["decided_by"] == "judge" and scored["judge_asked"] >= 1

    workflow = _workflow_outcome(cfg, attack.attack_id, actions)
    assert (mine["task_score"], mine["attack_success"], mine["exposed"]) == (
        workflow.task_score,
        workflow.attack_success,
        workflow.exposed,
    )
    assert workflow.decisions is not None and mine["decisions"] == workflow.decisions.model_dump(mode="json")
    assert (mine["harm"], mine["disclosure"], mine["utility"]) == (
        workflow.harm,
        workflow.disclosure,
        workflow.utility,
    )


async def _stdio_agent(params, errlog: Path, actions: list[tuple[str, dict]]) -> dict:
    """An outside agent over stdio: the SDK's client starts the server as its subprocess (its stderr to
    ``errlog``), lists the tools and the prompt, fetches the prompt (which starts the episode) and makes the
    episode's calls."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    seen: dict = {}
    with open(errlog, "w") as err, anyio.fail_after(120):
        async with Client(stdio_client(params, errlog=err)) as client:
            seen["tools"] = [t.name for t in (await client.list_tools()).tools]
            seen["prompts"] = (await client.list_prompts()).model_dump_json()
            seen["prompt"] = (await client.get_prompt("task")).messages[0].content.text
            seen["results"] = [
                (await client.call_tool(name, args)).model_dump_json() for name, args in actions
            ]
    return seen


def test_an_mcp_client_over_stdio_completes_an_attacked_episode_and_apex_score_matches_the_workflow(
    served, tmp_path, capsys
):
    from mcp import StdioServerParameters

    cfg_path, cfg, task, attack = served
    actions = _actions(cfg, task, attack)
    record = tmp_path / "episode.json"
    argv = ["apex", "serve", TASK, "--config", str(cfg_path), "--attack", attack.attack_id]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "evoaudit.cli", *argv, "--record", str(record)]
    )
    seen = anyio.run(_stdio_agent, params, tmp_path / "server.log", actions)

    suite, instance = commands.served_instance(cfg, TASK, "v0")
    assert seen["prompt"] == suite.prompt_for(instance, attack.attack_id)
    # stdio serves one server with every workspace tool and the task prompt, never the harness's reset.
    assert sorted(seen["tools"]) == sorted(tools.TOOLS) and '"name":"task"' in seen["prompts"]
    # What the server declares (tools, prompts, the prompt) carries no gold value or rubric; tool results
    # are the workspace's own files, which hold the task's inputs.
    shown = json.dumps({k: seen[k] for k in ("tools", "prompts", "prompt")})
    leaks = [str(v) for v in task.record.gold.values() if len(str(v)) > 3]
    leaks += [json.dumps(item.check, sort_keys=True) for item in task.record.rubric]
    leaks += [item.verifier_id for item in task.record.rubric if len(item.verifier_id) > 6]
    assert not [s for s in leaks if s in shown]

    doc = ServedRecord.model_validate_json(record.read_text())
    assert (doc.task_id, doc.attack) == (TASK, attack.attack_id)
    assert [len(e.calls) for e in doc.episodes] == [len(actions)] == [len(seen["results"])]
    assert doc.episodes[0].observer_log, "the attack's watcher did not act"

    out = tmp_path / "score.json"
    assert main(["apex", "score", str(record), "--config", str(cfg_path), "--json", str(out)]) in (0, None)
    assert "episode 0: task score" in capsys.readouterr().out
    mine = json.loads(out.read_text())["episodes"][0]
    assert mine["exposed"] is True and mine["attack_success"] is True
    workflow = _workflow_outcome(cfg, attack.attack_id, actions)
    assert (mine["task_score"], mine["attack_success"], mine["exposed"]) == (
        workflow.task_score,
        workflow.attack_success,
        workflow.exposed,
    )
    assert mine["decisions"] == json.loads(workflow.model_dump_json())["decisions"]
    assert (mine["harm"], mine["disclosure"], mine["utility"]) == (
        workflow.harm,
        workflow.disclosure,
        workflow.utility,
    )


def test_an_unknown_attack_id_names_the_attack_set_and_the_nearest_ids(served):
    _, cfg, _, attack = served
    unknown = rf"attacks\.json: no attack 'c9z' for task {TASK}; nearest ids: c"
    with pytest.raises(AuditError, match=unknown):
        commands.attacked_host(cfg, TASK, "v0", "c9z", None)
    with pytest.raises(AuditError, match=r"endpoint variant v0"):
        commands.attacked_host(cfg, TASK, "v1", attack.attack_id, None)


def test_a_reset_restores_the_world_byte_for_byte_and_rearms_the_watcher(served, tmp_path):
    _, cfg, _, attack = served
    host = commands.attacked_host(cfg, TASK, "v0", attack.attack_id, tmp_path / "r.json")
    files = {p: f.data for p, f in host.ws.files.items()}
    state = host.ws.state()
    for name, args in exposure_plan(attack):
        tools.call_tool(host.ws, name, args)
        host.flush()
    tools.call_tool(host.ws, "write_file", {"path": "shared/x.md", "content": "x"})
    host.flush()
    fired = list(host.ws.observer_log)
    assert fired and host.ws.state() != state
    assert host.reset() == 1 and host.reset() == 1  # an episode without calls is not a new one
    assert {p: f.data for p, f in host.ws.files.items()} == files and host.ws.state() == state
    assert host.ws.observer_log == [] and not host.ws.calls
    for name, args in exposure_plan(attack):
        tools.call_tool(host.ws, name, args)
        host.flush()
    assert host.ws.observer_log == fired[: len(host.ws.observer_log)] and host.ws.observer_log
    doc = ServedRecord.model_validate_json((tmp_path / "r.json").read_text())
    assert [e.episode for e in doc.episodes] == [0, 1]


def test_apex_score_refuses_a_clean_servers_json_lines_record(served, tmp_path, capsys):
    cfg_path, *_ = served
    lines = tmp_path / "clean.jsonl"
    lines.write_text('{"seq": 0}\n{"seq": 1}\n')
    assert main(["apex", "score", str(lines), "--config", str(cfg_path)]) != 0
    assert f"{lines}: not a served-episode record" in capsys.readouterr().err


def test_the_clean_server_serves_the_task_prompt_and_no_gold_or_rubric(served):
    from evoaudit.suite.apex.runtime.mcp_server import make_server

    _, _, task, _ = served

    async def fetch():
        from mcp import Client

        async with Client(make_server(task.world, "all", prompt=task.record.prompt)) as client:
            listed = await client.list_prompts()
            got = await client.get_prompt("task")
            return listed.model_dump_json(), got.messages[0].content.text

    listed, text = anyio.run(fetch)
    assert text == task.record.prompt and '"name":"task"' in listed
    assert task.record.rubric and not any(item.verifier_id in listed + text for item in task.record.rubric)


def _reads_of(path: str) -> list[tuple[str, dict]]:
    """Every way an agent reads a file through the served tools, and long listings (time stamps)."""
    folder, name = path.rsplit("/", 1)
    commands_ = [
        "ls -la",
        f"ls -la /workspace/{folder}",
        f"grep -r -l -i the {folder}",
        f"cat {folder}/*.{name.rsplit('.', 1)[-1]} | head -c 200",
        f"cd {folder} && head -c 200 {name}",
        f"cp {path} /tmp/c && head -c 100 /tmp/c",
        f"tar cf /tmp/t.tar {path} && tar xOf /tmp/t.tar | head -c 100",
        f"ln -s /workspace/{path} /tmp/l && head -c 100 /tmp/l",
        f"python -c \"import os; print(sorted(f for _, _, fs in os.walk('{folder}') for f in fs)[:3])\"",
        f"python -c \"print(open('{path}', errors='replace').read()[:100])\"",
        f"zip -q /tmp/z.zip {path} && unzip -p /tmp/z.zip | head -c 100",
    ]
    return [("run_command", {"command": c}) for c in commands_] + [
        ("read_file", {"path": f"/workspace/{path}"}),
        ("search_files", {"query": name}),
    ]


def test_a_scripted_agents_record_with_long_listings_scores_in_full_and_an_unscorable_episode_is_named(
    served, tmp_path, capsys
):
    from evoaudit.suite.apex.runtime.mcp_server import _recorded_call

    cfg_path, cfg, task, attack = served
    actions = _reads_of(attack.watcher.monitored_path) + _actions(cfg, task, attack)
    record = tmp_path / "episode.json"
    host = commands.attacked_host(cfg, TASK, "v0", attack.attack_id, record)
    for _ in range(2):
        host.begin()
        for name, args in actions:
            _recorded_call(host, name, **args)
    # The record as a server would have written it a few minutes earlier: other time stamps in every long
    # listing; and episode 1's final state is not the one this world gives.
    doc = json.loads(record.read_text())
    listings = 0
    for ep in doc["episodes"]:
        for call in ep["calls"]:
            if call["args"].get("command", "").startswith("ls -la"):
                stamped = re.sub(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d", "Jan  1 00:00", call["result"])
                listings += stamped != call["result"]
                call["result"] = stamped
    assert listings == 4
    doc["episodes"][1]["state_sha256"] = "0" * 64
    record.write_text(json.dumps(doc))

    out = tmp_path / "score.json"
    argv = ["apex", "score", str(record), "--config", str(cfg_path), "--json", str(out)]
    assert main(argv) not in (0, None)
    captured = capsys.readouterr()
    assert "episode(s) [1] could not be scored" in captured.err
    printed = captured.out
    assert "episode 0: task score" in printed and "episode 1: not scored: " in printed
    rows = json.loads(out.read_text())["episodes"]
    assert [(r["episode"], r["scored"]) for r in rows] == [(0, True), (1, False)]
    assert rows[0]["calls_differing"] == [] and "state_sha256" in rows[1]["reason"]
    assert rows[0]["exposed"] is True and rows[0]["attack_success"] is True
    workflow = _workflow_outcome(cfg, attack.attack_id, actions)
    assert (rows[0]["task_score"], rows[0]["attack_success"], rows[0]["exposed"]) == (
        workflow.task_score,
        workflow.attack_success,
        workflow.exposed,
    )


def _served_programs(served, tmp_path, commands_: list[str]) -> tuple[Path, dict]:
    """A record of one attacked episode whose agent ran ``commands_``, and the record as JSON."""
    from evoaudit.suite.apex.runtime.mcp_server import _recorded_call

    _, cfg, _, attack = served
    record = tmp_path / "episode.json"
    host = commands.attacked_host(cfg, TASK, "v0", attack.attack_id, record)
    host.begin()
    for command in commands_:
        _recorded_call(host, "run_command", command=command)
    return record, json.loads(record.read_text())


def _score(served, record: Path, tmp_path) -> tuple[int | None, dict]:
    out = tmp_path / "score.json"
    code = main(["apex", "score", str(record), "--config", str(served[0]), "--json", str(out)])
    return code, json.loads(out.read_text())["episodes"][0]


@needs_bwrap
def test_apex_score_takes_the_recorded_text_of_a_program_printing_another_each_run_and_lists_the_call(
    served, tmp_path
):
    record, doc = _served_programs(served, tmp_path, ["echo $RANDOM$RANDOM$RANDOM", "echo hello"])
    # The second call's record edited: a deterministic program's text is the record's to answer for.
    doc["episodes"][0]["calls"][1]["result"] = doc["episodes"][0]["calls"][1]["result"].replace(
        "hello", "bye"
    )
    record.write_text(json.dumps(doc))
    code, row = _score(served, record, tmp_path)
    assert code in (0, None) and row["scored"] is True
    assert row["calls_nondeterministic"] == [{"seq": 0, "paths": [], "output": True}]
    assert row["calls_differing"] == [1]


@needs_bwrap
def test_apex_serve_records_a_programs_random_bytes_and_apex_score_writes_them_listing_the_call(
    served, tmp_path
):
    record, doc = _served_programs(served, tmp_path, ["head -c 32 /dev/urandom > noise.bin", "ls"])
    effects = [c.get("file_effects") for c in doc["episodes"][0]["calls"]]
    assert effects[1] is None and [e["path"] for e in effects[0]] == ["noise.bin"]
    assert len(base64.b64decode(effects[0][0]["data"])) == 32
    code, row = _score(served, record, tmp_path)
    assert code in (0, None) and row["scored"] is True, row.get("reason")
    assert row["calls_nondeterministic"] == [{"seq": 0, "paths": ["noise.bin"]}]


@needs_bwrap
def test_apex_score_refuses_recorded_bytes_a_deterministic_program_does_not_write(served, tmp_path):
    record, doc = _served_programs(served, tmp_path, ["printf abc > notes.bin"])
    forged = FileEffect.written("notes.bin", b"not what printf wrote").model_dump(mode="json")
    doc["episodes"][0]["calls"][0]["file_effects"] = [forged]
    record.write_text(json.dumps(doc))
    code, row = _score(served, record, tmp_path)
    assert code not in (0, None) and row["scored"] is False
    assert "call 0 (run_command): the recorded file effects" in row["reason"]


@needs_bwrap
def test_a_served_episodes_rollout_carries_its_effects_and_replays_clean_listing_the_call(served, tmp_path):
    from evoaudit.replay.apex import replay_apex_rollout
    from evoaudit.report.apex.served import read_record, score_episode

    _, cfg, _, _ = served
    record, _ = _served_programs(served, tmp_path, ["head -c 32 /dev/urandom > noise.bin"])
    doc = read_record(record)
    suite, instance = commands.served_instance(cfg, TASK, "v0")
    _, judge = stage_judge(cfg)
    rollout, _, _ = score_episode(suite, instance, doc, doc.episodes[0], cfg, judge)
    assert [e.path for e in rollout.calls[0].file_effects] == ["noise.bin"]
    replayed = replay_apex_rollout(rollout, instance)
    assert replayed.mismatches == {}
    assert replayed.nondeterministic_calls == {"call_0": ["noise.bin"]}
