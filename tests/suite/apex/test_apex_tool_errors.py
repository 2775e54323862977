"""Every bad tool call is the agent's failure, seen and recorded, on both transports; a bug of ours is
recorded and raised; names no filesystem could hold never enter a workspace, from an agent or an archive."""

from __future__ import annotations

import asyncio
import json

import pytest
from scripted_model_kit import Scripted

from evoaudit.agent.loop import run_episode
from evoaudit.records import Message
from evoaudit.suite.apex.base import worldfmt
from evoaudit.suite.apex.base.docs import deterministic_zip
from evoaudit.suite.apex.base.workspace import Workspace
from evoaudit.suite.apex.runtime import tools
from evoaudit.suite.apex.runtime.transport import connect
from evoaudit.suite.apex.worlds import cache

# (tool, arguments, a part of the error the agent must see)
BAD_CALLS = [
    ("list_files", {"directory": "../.."}, "leaves the workspace"),
    (
        "write_file",
        {"path": "out.md", "content": 5},
        "bad arguments for write_file: content: Input should be",
    ),
    (
        "write_cells",
        {"path": "t.xlsx", "sheet": "S", "cells": ["A1", 1]},
        "bad arguments for write_cells: cells",
    ),
    ("read_file", {"path": "broken.xlsx"}, "cannot read this file as xlsx: BadZipFile"),
    ("run_command", {"command": "true", "timeout": "abc"}, "bad arguments for run_command: timeout"),
    ("read_file", {"path": "notes.md", "page": "two"}, "bad arguments for read_file: page"),
    ("read_file", {"path": "notes.md", "lines": 3}, "bad arguments for read_file: lines: Extra inputs"),
    ("write_file", {"content": "x"}, "bad arguments for write_file: path: Field required"),
    ("write_file", {"path": "a\x00b.md", "content": "x"}, "holds a NUL character"),
    ("write_file", {"path": "x" * 256 + ".md", "content": "x"}, "has a part over 255 bytes"),
    ("write_file", {"path": "notes.md/inner.md", "content": "x"}, "notes.md is a file, not a folder"),
    ("write_file", {"path": "deals", "content": "x"}, "it is a folder (it holds deals/memo.md)"),
    ("write_file", {"path": "C:/etc/job", "content": "x"}, "names a drive"),
    ("write_docx", {"path": "../up.docx", "text": "x"}, "leaves the workspace"),
    ("read_docx", {"path": "broken.docx"}, "cannot read broken.docx as docx"),
    ("read_pdf", {"path": "broken.pdf"}, "cannot read broken.pdf as pdf"),
    ("read_sheet", {"path": "broken.xlsx"}, "cannot read broken.xlsx as xlsx"),
    ("write_cells", {"path": "broken.xlsx", "sheet": "S", "cells": {"A1": 1}}, "cannot write cells to"),
    ("write_cells", {"path": "t.xlsx", "sheet": "a/b", "cells": {"A1": 1}}, "cannot write cells to t.xlsx"),
    ("run_command", {"command": "echo \x00"}, "command holds a NUL character"),
    ("run_command", {"command": "echo \ud800"}, "bad arguments for run_command: command: text is not valid"),
    ("run_command", {"command": "#" * (64 * 1024 + 1)}, "over 65536: write the program to a file"),
    ("run_command", {"command": "true", "timeout": True}, "timeout: expected an integer, not true/false"),
    ("read_file", {"path": "notes.md", "page": True}, "page: expected an integer, not true/false"),
    (
        "send_mail",
        {"to": ["bob@firm.com"], "subject": "\ud800", "body": "x"},
        "bad arguments for send_mail: subject: text is not valid UTF-8",
    ),
    (
        "write_cells",
        {"path": "t.xlsx", "sheet": "S", "cells": {"A1": "ok", "B1": "x\udfff"}},
        "bad arguments for write_cells: cells.B1: text is not valid UTF-8",
    ),
]


def _ws() -> Workspace:
    ws = Workspace("w", "ana@firm.com", ("firm.com",))
    ws.put_file("notes.md", b"notes\n")
    ws.put_file("deals/memo.md", b"memo\n")
    for name, data in (
        ("broken.xlsx", b"not a zip"),
        ("broken.docx", b"PK\x03\x04junk"),
        ("broken.pdf", b"%PDF-1"),
    ):
        ws.put_file(name, data)
    return ws


def _episode(kind: str):
    ws = _ws()
    before = ws.state()
    session = connect(ws, kind)
    try:
        calls = [(name, args) for name, args, _ in BAD_CALLS]
        opening = [Message(role="system", content="s"), Message(role="user", content="u")]
        episode = asyncio.run(run_episode(Scripted(calls), opening, session, max_steps=5, seed=None))
    finally:
        session.close()
    return ws, before, episode


def test_every_bad_call_is_a_recorded_tool_error_in_a_completed_direct_episode():
    ws, before, episode = _episode("direct")
    assert episode.final_output == "done" and episode.infra_failure is None
    for (name, args, expected), executed, record in zip(BAD_CALLS, episode.calls, ws.calls, strict=True):
        assert executed.error is not None and expected in executed.error, (name, args, executed.error)
        assert (record.tool, record.error) == (name, executed.error)
    told = [m.content for m in episode.messages if m.role == "tool"]
    assert told == [c.error for c in episode.calls]
    after = ws.state()
    assert after["files"] == before["files"]  # nothing half-written


def test_calls_with_text_utf8_cannot_encode_are_recorded_as_json_with_the_text_escaped():
    ws, _, episode = _episode("direct")
    for executed, record in zip(episode.calls, ws.calls, strict=True):
        executed.model_dump_json()
        json.dumps(vars(record), ensure_ascii=False).encode("utf-8")
    subjects = [c.args["subject"] for c in episode.calls if c.function == "send_mail"]
    assert subjects == ["\\ud800"]


def test_bad_calls_over_mcp_are_tool_errors_with_the_direct_text_and_record():
    direct_ws, _, direct = _episode("direct")
    mcp_ws, _, over_mcp = _episode("mcp")
    assert over_mcp.final_output == "done"
    assert [c.error for c in over_mcp.calls] == [c.error for c in direct.calls]
    assert [vars(c) for c in mcp_ws.calls] == [vars(c) for c in direct_ws.calls]


def test_checked_arguments_keep_the_callers_values_and_fill_defaults():
    ws = _ws()
    tools.call_tool(ws, "write_cells", {"path": "t.xlsx", "sheet": "S", "cells": {"A1": 5, "B1": 2.5}})
    tools.call_tool(ws, "read_file", {"path": "notes.md", "page": "1"})
    first, second = ws.calls
    assert first.args["cells"] == {"A1": 5, "B1": 2.5} and type(first.args["cells"]["A1"]) is int
    assert second.error is None and second.args == {"path": "notes.md", "page": 1}


def test_a_tool_that_crashes_is_recorded_then_raised_directly_and_an_error_over_mcp(monkeypatch, tmp_path):
    def list_channels(ws: Workspace) -> str:
        raise RuntimeError("planted bug")

    monkeypatch.setitem(tools.TOOLS, "list_channels", list_channels)
    ws = _ws()
    with pytest.raises(RuntimeError, match="planted bug"):
        tools.call_tool(ws, "list_channels", {})
    assert ws.calls[-1].error == "internal error: RuntimeError: planted bug"

    import anyio
    from mcp import Client

    from evoaudit.suite.apex.runtime.mcp_server import _Recorder, make_server

    ws = _ws()
    record = tmp_path / "record.jsonl"

    async def drive():
        async with Client(make_server(ws, "all", _Recorder(ws, record))) as client:
            return await client.call_tool("list_channels", {})

    result = anyio.run(drive)
    assert result.is_error and "planted bug" not in result.content[0].text  # the crash stays server side
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(r["tool"], r["error"]) for r in lines] == [
        ("list_channels", "internal error: RuntimeError: planted bug")
    ]


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([("filesystem/../escape.txt", b"x")], "leaves the workspace"),
        ([("/abs/file.txt", b"x")], "the name is absolute"),
        ([("filesystem//etc/passwd", b"x")], "the name is absolute"),
        ([(".apps_data/../../x", b"x")], "leaves the workspace"),
        ([("filesystem/" + "n" * 300, b"x")], "over 255 bytes"),
        (
            [("filesystem/a", b"x"), ("filesystem/a/b", b"y")],
            "a is a file (entry 'filesystem/a'), not a folder",
        ),
        (
            [("filesystem/a/b", b"x"), ("filesystem/a//b", b"y")],
            "names the same file as entry 'filesystem/a/b'",
        ),
    ],
)
def test_world_zip_with_an_impossible_entry_name_is_refused_naming_the_entry(entries, expected):
    raw = deterministic_zip(entries)
    with pytest.raises(worldfmt.WorldFormatError, match="worlds/bad.zip: zip entry") as info:
        worldfmt.world_from_zip(raw, "worlds/bad.zip")
    assert expected in str(info.value) and repr(entries[-1][0])[:40] in str(info.value)


def test_world_that_is_not_a_zip_is_a_world_format_error():
    with pytest.raises(worldfmt.WorldFormatError, match="w.zip: not a zip archive"):
        worldfmt.world_from_zip(b"nope", "w.zip")


def test_task_files_zip_with_an_escaping_entry_is_refused_naming_the_file(tmp_path):
    (tmp_path / "task_files").mkdir()
    bad = tmp_path / "task_files" / "t.v0.zip"
    bad.write_bytes(deterministic_zip([("filesystem/ok.md", b"x"), ("filesystem/../../evil.sh", b"y")]))
    with pytest.raises(
        worldfmt.WorldFormatError, match=r"t\.v0\.zip: zip entry 'filesystem/\.\./\.\./evil\.sh'"
    ):
        cache.load_task_files(tmp_path, "t")


def test_world_zip_with_good_names_still_loads():
    ws = _ws()
    back = worldfmt.world_from_zip(worldfmt.world_to_zip(ws))
    assert {p: f.data for p, f in back.files.items()} == {p: f.data for p, f in ws.files.items()}


def test_an_agent_path_with_a_leading_slash_names_the_same_workspace_file():
    ws = _ws()
    assert tools.call_tool(ws, "read_file", {"path": "/notes.md"}) == tools.call_tool(
        ws, "read_file", {"path": "notes.md"}
    )
    tools.call_tool(ws, "write_file", {"path": "/etc/cron.d/job", "content": "x"})
    assert ws.files["etc/cron.d/job"].data == b"x"  # a workspace file, never the host's /etc
