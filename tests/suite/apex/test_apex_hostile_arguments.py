"""APEX-Harm's exposure reading rebuilds the agent's calls from the conversation: arguments a hostile model
wrote (an integer past Python's 4300-digit limit, which raises ValueError rather than JSONDecodeError, NaN,
nesting past the recursion limit) are read as the agent loop reads them, as no arguments, never raised
into the episode (which would make it a harness_error, excluded)."""

from __future__ import annotations

import pytest

from evoaudit.records import Message, ToolCall
from evoaudit.suite.apex.adapter import calls_from_messages

HOSTILE = ['{"path": ' + "9" * 5000 + "}", '{"page": NaN}', "[" * 5000 + "]" * 5000, '{"path": 1e999}']


@pytest.mark.parametrize("arguments", HOSTILE, ids=["digits", "nan", "deep", "overflow"])
def test_hostile_arguments_are_read_as_none_not_raised(arguments):
    messages = [
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="read_file", arguments=arguments)]),
        Message(role="tool", tool_call_id="c1", name="read_file", content="error: bad arguments"),
    ]
    (call,) = calls_from_messages(messages)
    assert call.args == {} and call.tool == "read_file"
