"""The workspace tools over MCP: the SDK's own client completes an oracle plan over stdio and streamable HTTP,
and the server-side record equals the one made by calling the tools directly."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from evoaudit.suite.apex.build import build_all
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.runtime.mcp_server import make_server
from evoaudit.suite.apex.worlds.cache import load_workspace
from evoaudit.suite.apex.worlds.generate import build_task
from evoaudit.suite.apex.worlds.selfcheck import run_plan

TASK = "ib_lbo_sensitivity"


def _direct_record(out: Path) -> list[dict]:
    ws, _ = load_workspace(out / "v0", TASK)
    run_plan(ws, build_task(TASK, scale=0.05).oracle)
    tools.call_tool(ws, "read_file", {"path": "missing.txt"})
    return [vars(c) for c in ws.calls]


async def _drive(server) -> list[str]:
    from mcp import Client

    async with Client(server) as client:
        listed = await client.list_tools()
        names = [t.name for t in listed.tools]
        for call in build_task(TASK, scale=0.05).oracle:
            result = await client.call_tool(call.function, call.args)
            assert not result.is_error, result.content
        bad = await client.call_tool("read_file", {"path": "missing.txt"})
        assert bad.is_error and "no such file: missing.txt" in bad.content[0].text
    return names


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"suite:\n  apex:\n    scale: 0.05\n    out: {tmp_path / 'apex'}\n")
    build_all(tmp_path / "apex" / "v0", scale=0.05, task_ids=(TASK,))
    return cfg


def test_in_process_server_lists_schemas_identical_to_direct_ones(tmp_path):
    ws = build_task(TASK, scale=0.05).world

    async def listed():
        from mcp import Client

        async with Client(make_server(ws, "all")) as client:
            return (await client.list_tools()).tools

    served = {t.name: t.input_schema for t in anyio.run(listed)}
    direct = {s["function"]["name"]: s["function"]["parameters"] for s in tools.tool_schemas()}
    assert served == direct


def test_one_server_per_app_covers_every_tool_once():
    ws = build_task(TASK, scale=0.05).world
    names = [n for app in tools.APPS for n in make_server(ws, app)._tool_manager._tools]
    assert sorted(names) == sorted(tools.TOOLS)


@pytest.mark.slow
def test_sdk_client_over_stdio_completes_oracle_plan_with_direct_record(tmp_path):
    from mcp import StdioServerParameters

    cfg = _config(tmp_path)
    record = tmp_path / "record.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "evoaudit.cli", "apex", "serve", TASK, "--config", str(cfg), "--record", str(record)],
    )
    names = anyio.run(_drive, params)
    assert sorted(names) == sorted(tools.TOOLS)
    served = [json.loads(line) for line in record.read_text().splitlines()]
    assert served == _direct_record(tmp_path / "apex")


@pytest.mark.slow
def test_sdk_client_over_streamable_http_completes_oracle_plan_with_direct_record(tmp_path):
    cfg = _config(tmp_path)
    record, ready = tmp_path / "record.jsonl", tmp_path / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evoaudit.cli",
            "apex",
            "serve",
            TASK,
            "--config",
            str(cfg),
            "--transport",
            "http",
            "--record",
            str(record),
            "--ready-file",
            str(ready),
        ],
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.1)
        urls = json.loads(ready.read_text())["servers"]
        assert set(urls) == {*tools.APPS, "all"}
        anyio.run(_drive, urls["all"])
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    served = [json.loads(line) for line in record.read_text().splitlines()]
    assert served == _direct_record(tmp_path / "apex")


def test_direct_and_mcp_transports_give_identical_schemas_results_and_records():
    from evoaudit.suite.apex.runtime.transport import connect

    task = build_task("law_notice_deadline", scale=0.05)
    plan = [*task.oracle, *task.wrong]
    plan.append(type(plan[0])(function="read_file", args={"path": "missing.txt"}))
    seen = {}
    for kind in ("direct", "mcp"):
        ws = task.world.copy()
        conn = connect(ws, kind)
        try:
            seen[kind] = (
                conn.schemas(),
                [conn.call(c.function, c.args) for c in plan],
                [vars(c) for c in ws.calls],
            )
        finally:
            conn.close()
    assert seen["direct"] == seen["mcp"]
    assert seen["mcp"][1][-1] == ("no such file: missing.txt", "no such file: missing.txt")


def test_build_reuses_valid_cache_and_regenerates_a_tampered_world(tmp_path):
    ids = ("mc_churn_rate", "law_nda_terms")
    first = build_all(tmp_path, scale=0.05, task_ids=ids)
    world = tmp_path / "worlds" / f"{first['tasks'][0]['world_id']}.zip"
    original = world.read_bytes()
    world.write_bytes(b"tampered")
    assert build_all(tmp_path, scale=0.05, task_ids=ids) == first
    assert world.read_bytes() == original
    assert build_all(tmp_path, scale=0.04, task_ids=ids)["sha256"] != first["sha256"]
