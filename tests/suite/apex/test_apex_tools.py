"""APEX workspace tools: one function each, recorded through one dispatcher, errors as tool errors."""

from __future__ import annotations

from evoaudit.suite.apex.base.workspace import ChatChannel, Email, Workspace
from evoaudit.suite.apex.runtime import tools


def _ws() -> Workspace:
    ws = Workspace("w", "ana@firm.com", ("firm.com",))
    ws.put_file("deals/memo.md", ("line\n" * 3000).encode())
    ws.put_file("deals/.drafts/old.md", b"hidden draft mentions Atlas\n")
    ws.put_file("deals/atlas.txt", b"Atlas model notes\n")
    ws.mail.append(Email("m1", "ben@firm.com", ("ana@firm.com",), "Atlas update", "numbers attached", 1))
    ws.chat["s1"] = ChatChannel("s1", "deal-team", ("ana@firm.com", "ben@firm.com"), False)
    return ws


def test_tool_names_are_valid_function_names_and_schemas_cover_every_tool():
    names = [s["function"]["name"] for s in tools.tool_schemas()]
    assert names == list(tools.TOOLS) and all(tools.TOOL_NAME.match(n) for n in names)
    read = next(s for s in tools.tool_schemas() if s["function"]["name"] == "read_file")["function"]
    assert read["parameters"]["required"] == ["path"] and "page" in read["parameters"]["properties"]


def test_hidden_files_are_listed_and_searched_only_when_asked():
    ws = _ws()
    assert ".drafts" not in tools.call_tool(ws, "list_files", {"directory": "deals"})[0]
    assert (
        "deals/.drafts/old.md"
        in tools.call_tool(ws, "list_files", {"directory": "deals", "include_hidden": True})[0]
    )
    assert ".drafts" not in tools.call_tool(ws, "search_files", {"query": "atlas"})[0]
    assert ".drafts" in tools.call_tool(ws, "search_files", {"query": "atlas", "include_hidden": True})[0]


def test_read_file_pages_long_text():
    ws = _ws()
    first = tools.call_tool(ws, "read_file", {"path": "deals/memo.md"})[0]
    assert first.startswith("[deals/memo.md page 1/4]")
    assert (
        tools.call_tool(ws, "read_file", {"path": "deals/memo.md", "page": 9})[1]
        == "page 9 out of range 1..4"
    )


def test_errors_are_returned_and_recorded_not_raised():
    ws = _ws()
    text, err = tools.call_tool(ws, "read_file", {"path": "../etc/passwd"})
    assert err and "leaves the workspace" in err and text == err
    assert tools.call_tool(ws, "nope", {})[1] == "unknown tool 'nope'"
    assert "bad arguments" in tools.call_tool(ws, "read_file", {})[1]
    assert [c.error is not None for c in ws.calls] == [True, True, True]
    assert [c.tick for c in ws.calls] == [1, 2, 3]  # the logical clock, one tick per call


def test_external_mail_reaches_the_outbound_collector_internal_does_not():
    ws = _ws()
    tools.call_tool(ws, "send_mail", {"to": ["ben@firm.com"], "subject": "s", "body": "b"})
    assert ws.outbound == []
    tools.call_tool(ws, "forward_mail", {"msg_id": "m1", "to": ["x@outside.org"], "note": "fyi"})
    assert [(o.channel, o.destination, o.actor) for o in ws.outbound] == [("mail", "x@outside.org", "agent")]
    assert "numbers attached" in ws.outbound[0].payload
    assert "Fwd: Atlas update" in tools.call_tool(ws, "search_mail", {"folder": "Sent"})[0]


def test_write_share_calendar_chat_and_answer_change_state():
    ws = _ws()
    tools.call_tool(ws, "write_file", {"path": "shared/out.md", "content": "x"})
    tools.call_tool(ws, "share_file", {"path": "shared/out.md", "with_email": "ben@firm.com"})
    assert ws.files["shared/out.md"].shared_with == ("ben@firm.com",)
    assert (
        tools.call_tool(
            ws, "create_event", {"title": "t", "start": "2026-03-05T09:00:00", "end": "2026-03-05T10:00:00"}
        )[1]
        is None
    )
    assert "t" in tools.call_tool(ws, "list_events", {"start": "2026-03-05", "end": "2026-03-05"})[0]
    assert tools.call_tool(ws, "create_event", {"title": "t", "start": "tomorrow", "end": "x"})[1]
    tools.call_tool(ws, "post_message", {"channel": "deal-team", "text": "done"})
    assert "ana@firm.com: done" in tools.call_tool(ws, "read_channel", {"channel": "s1"})[0]
    tools.call_tool(ws, "write_cells", {"path": "out.xlsx", "sheet": "S", "cells": {"B2": 3.5}})
    assert "3.5" in tools.call_tool(ws, "read_sheet", {"path": "out.xlsx"})[0]
    tools.call_tool(ws, "submit_answer", {"answer": "42"})
    assert ws.final_answer == "42"


def test_binary_file_read_as_text_is_a_decode_error():
    ws = _ws()
    ws.put_file("scripts/helper", b"\x7fELF\x02\x01\x01\x00\xff\xfe")
    assert "can't decode" in tools.call_tool(ws, "read_file", {"path": "scripts/helper"})[1]
