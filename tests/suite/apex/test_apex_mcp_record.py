"""The MCP server's call record under concurrency: real SDK clients over streamable HTTP on 127.0.0.1, many
calls in flight at once; the record holds every call exactly once, in the order the server ran them,
errors and a crashing tool included."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio

CLIENTS, CALLS = 5, 60

# The server: a small workspace built in code, and one tool replaced by a planted bug (a non-ToolError).
SERVER = """
import sys
import anyio
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.runtime.mcp_server import serve_http
from evoaudit.suite.apex.base.workspace import Workspace


def list_channels(ws):
    raise RuntimeError("planted bug")


tools.TOOLS["list_channels"] = list_channels
ws = Workspace("w", "ana@firm.com", ("firm.com",))
ws.put_file("notes.md", b"notes")
anyio.run(serve_http, ws, "127.0.0.1", 0, sys.argv[1], sys.argv[2])
"""


def _call(client: int, i: int) -> tuple[str, dict]:
    if (client, i) == (0, 0):
        return "list_channels", {}
    if i % 10 == 5:
        return "write_file", {"path": f"c{client}/f{i}.md", "content": i}  # bad: content is not text
    return "search_files", {"query": f"q-{client}-{i}"}


async def _clients(url: str) -> dict[tuple[int, int], bool]:
    from mcp import Client

    errors: dict[tuple[int, int], bool] = {}

    async def one_client(c: int) -> None:
        async with Client(url) as client:

            async def one(i: int) -> None:
                name, args = _call(c, i)
                errors[(c, i)] = (await client.call_tool(name, args)).is_error

            async with anyio.create_task_group() as tg:
                for i in range(CALLS):
                    tg.start_soon(one, i)

    async with anyio.create_task_group() as tg:
        for c in range(CLIENTS):
            tg.start_soon(one_client, c)
    return errors


def _key(line: dict) -> tuple[int, int]:
    if line["tool"] == "list_channels":
        return (0, 0)
    text = line["args"].get("query") or line["args"]["path"]
    c, i = text[2:].split("-") if text.startswith("q-") else text[1:-3].split("/f")
    return int(c), int(i)


def test_concurrent_clients_get_one_record_line_per_call_in_server_order(tmp_path: Path):
    record, ready = tmp_path / "record.jsonl", tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(record), str(ready)])
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        errors = anyio.run(_clients, json.loads(ready.read_text())["servers"]["all"])
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    n = CLIENTS * CALLS
    assert len(lines) == n
    # Server-side order: the record's sequence numbers and logical clock, line by line.
    assert [r["seq"] for r in lines] == list(range(n))
    assert [r["tick"] for r in lines] == list(range(1, n + 1))
    keys = [_key(r) for r in lines]
    assert sorted(keys) == sorted((c, i) for c in range(CLIENTS) for i in range(CALLS))  # each call once
    by_key = dict(zip(keys, lines, strict=True))
    assert by_key[(0, 0)]["error"] == "internal error: RuntimeError: planted bug"
    bad = [k for k in by_key if k[1] % 10 == 5]
    assert all(by_key[k]["error"].startswith("bad arguments for write_file: content") for k in bad)
    assert {k for k, is_error in errors.items() if is_error} == {(0, 0), *bad}
