"""The exports read the arguments a hostile model wrote without crashing: an integer past Python's
4300-digit conversion limit (a ValueError, not a JSONDecodeError), NaN, Infinity, a literal beyond the float
range and nesting past the recursion limit become a call without arguments (Inspect: with a parse error),
as the agent loop's strict reading (``tool_args``) refuses them."""

from __future__ import annotations

import json

import pytest
from test_export_inspect import _episode

from evoaudit.records import Message, ToolCall
from evoaudit.report.export import agentdojo_runs

PAYLOADS = {
    "digits": '{"amount": ' + "9" * 5000 + "}",
    "nan": '{"amount": NaN}',
    "infinity": '{"amount": -Infinity}',
    "overflow": '{"amount": 1e999}',
    "deep": "[" * 5000 + "]" * 5000,
}


def _hostile(arguments: str):
    """A rollout whose last assistant message holds one call that was never executed (no recorded args)."""
    r = _episode("attacked", "injection_task_0", success=True, exposed=True)
    call = ToolCall(id="h1", name="send_money", arguments=arguments)
    msgs = [*r.messages, Message(role="assistant", content=None, tool_calls=[call])]
    return r.model_copy(update={"messages": msgs})


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_the_agentdojo_export_reads_hostile_arguments_as_none(payload):
    out = agentdojo_runs.messages(_hostile(PAYLOADS[payload]))
    (call,) = out[-1]["tool_calls"]
    assert call["function"] == "send_money" and call["args"] == {}
    json.dumps(out, allow_nan=False)  # the file AgentDojo's loader reads is strict JSON


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_the_inspect_export_reads_hostile_arguments_as_a_parse_error(payload):
    pytest.importorskip("inspect_ai.log", reason="the inspect extra (inspect-ai) is not installed")
    from evoaudit.report.export import inspect_logs

    out = inspect_logs.messages(_hostile(PAYLOADS[payload]))
    (call,) = out[-1].tool_calls
    assert call.arguments == {} and call.parse_error
    assert out[-1].metadata["evoaudit"]["raw_arguments"]["h1"] == PAYLOADS[payload]
