"""Tool calls written in the answer's text: every shape small models use is read, in order, and prose,
data and calls of tools the request did not offer stay text."""

from __future__ import annotations

import json

import pytest

from evoaudit.models.base import ChatRequest
from evoaudit.models.text_calls import find_text_calls
from evoaudit.models.wire import parse_completion
from evoaudit.records import Message, ToolCall

KNOWN = {"get_balance", "get_most_recent_transactions", "send_money"}
BALANCE = '{"name": "get_balance", "arguments": {}}'
RECENT = '{"name": "get_most_recent_transactions", "arguments": {"n": 10}}'


def _read(text: str) -> list[tuple[str, dict]]:
    found = find_text_calls(text, KNOWN)
    assert found is not None, text
    return [(c.name, json.loads(c.arguments)) for c in found.calls]


def test_a_bare_json_object_is_one_call():
    found = find_text_calls(RECENT, KNOWN)
    assert found is not None and found.shape == "json" and found.rest == ""
    assert _read(RECENT) == [("get_most_recent_transactions", {"n": 10})]


def test_several_objects_on_separate_lines_are_several_calls_in_order():
    text = f"{BALANCE}\n{RECENT}"
    assert _read(text) == [("get_balance", {}), ("get_most_recent_transactions", {"n": 10})]
    assert find_text_calls(text, KNOWN).rest == ""


def test_a_fenced_json_block_is_read_and_the_fence_leaves_with_it():
    text = f"Let me look.\n```json\n{BALANCE}\n{RECENT}\n```\nOne moment."
    found = find_text_calls(text, KNOWN)
    assert found is not None and found.shape == "fenced"
    assert [c.name for c in found.calls] == ["get_balance", "get_most_recent_transactions"]
    assert found.rest == "Let me look.\n\nOne moment."


def test_tool_call_tags_are_read_one_call_per_block():
    text = f"<tool_call>\n{BALANCE}\n</tool_call>\n<tool_call>\n{RECENT}\n</tool_call>"
    found = find_text_calls(text, KNOWN)
    assert found is not None and found.shape == "hermes" and found.rest == ""
    assert [c.name for c in found.calls] == ["get_balance", "get_most_recent_transactions"]


def test_an_unclosed_tool_call_tag_at_the_end_is_still_a_call():
    assert _read(f"<tool_call>\n{RECENT}") == [("get_most_recent_transactions", {"n": 10})]


def test_a_json_list_of_calls_is_several_calls():
    assert _read(f"[{BALANCE}, {RECENT}]") == [
        ("get_balance", {}),
        ("get_most_recent_transactions", {"n": 10}),
    ]


def test_mistral_marker_and_python_tag_are_wrappers_not_text():
    found = find_text_calls(f"Sure.\n[TOOL_CALLS] [{RECENT}]", KNOWN)
    assert found is not None and found.shape == "mistral" and found.rest == "Sure."
    found = find_text_calls(f"<|python_tag|>{BALANCE}", KNOWN)
    assert found is not None and found.shape == "llama3_json" and found.rest == ""


def test_arguments_as_a_json_encoded_string_are_kept_as_that_json_text():
    text = json.dumps({"name": "send_money", "arguments": json.dumps({"recipient": "US12", "amount": 5})})
    found = find_text_calls(text, KNOWN)
    assert found is not None
    assert found.calls[0].arguments == '{"recipient": "US12", "amount": 5}'


def test_parameters_instead_of_arguments_and_the_function_wrapper_are_read():
    assert _read('{"name": "get_most_recent_transactions", "parameters": {"n": 3}}') == [
        ("get_most_recent_transactions", {"n": 3})
    ]
    wrapped = {"type": "function", "function": {"name": "get_balance", "arguments": "{}"}}
    assert _read(json.dumps(wrapped)) == [("get_balance", {})]


def test_a_call_without_arguments_has_empty_arguments():
    assert _read('{"name": "get_balance"}') == [("get_balance", {})]


def test_prose_before_and_after_the_json_stays_as_the_rest():
    found = find_text_calls(f"I will check your balance first. {BALANCE} Then I can answer.", KNOWN)
    assert found is not None and [c.name for c in found.calls] == ["get_balance"]
    assert found.rest == "I will check your balance first.  Then I can answer."


def test_another_code_block_beside_the_call_is_left_intact():
    text = f"```python\nprint(1)\n```\n{BALANCE}"
    found = find_text_calls(text, KNOWN)
    assert found is not None and found.rest == "```python\nprint(1)\n```"


@pytest.mark.parametrize(
    "text",
    [
        "I will send the money now.",
        "Use {n} as the count and {recipient} as the IBAN; get_balance is a tool.",
        'The "get_balance" tool returns {a number}.',
        '{"name": "rm_rf", "arguments": {}}',  # not a tool of the request
        '{"balance": 1810.0, "tool": "get_balance"}',  # data naming a tool is not a call
        '{"example": {"name": "get_balance", "arguments": {}}}',  # a call quoted inside data
        f'[{BALANCE}, {{"name": "rm_rf", "arguments": {{}}}}]',  # a list counts only if all are calls
        '{"name": "get_balance", "arguments": {',  # cut off: not JSON
        "",
    ],
)
def test_prose_data_and_unknown_tools_are_not_calls(text):
    assert find_text_calls(text, KNOWN) is None


def test_an_unknown_tool_beside_known_ones_is_left_in_the_text():
    text = f'{BALANCE}\n{{"name": "rm_rf", "arguments": {{}}}}'
    found = find_text_calls(text, KNOWN)
    assert found is not None and [c.name for c in found.calls] == ["get_balance"]
    assert found.rest == '{"name": "rm_rf", "arguments": {}}'


def _completion(content: str) -> str:
    message = {"role": "assistant", "content": content}
    return json.dumps({"choices": [{"message": message, "finish_reason": "stop"}]})


def test_several_text_calls_become_tool_calls_with_stable_ids_when_parsing_is_on():
    tools = tuple({"type": "function", "function": {"name": n}} for n in sorted(KNOWN))
    first = ToolCall(id="call_2_0", name="get_most_recent_transactions", arguments='{"n": 10}')
    request = ChatRequest(
        messages=(
            Message(role="system", content="sys"),
            Message(role="user", content="What did I spend?"),
            Message(role="assistant", tool_calls=[first]),
            Message(role="tool", tool_call_id="call_2_0", name=first.name, content="[]"),
        ),
        tools=tools,
    )
    body = _completion(f"{BALANCE}\n{RECENT}")
    parsed = parse_completion(body, request, parse_text_calls=True)
    again = parse_completion(body, request, parse_text_calls=True)
    assert parsed == again
    msg = parsed.message
    assert msg.tool_calls_from_text and msg.content is None
    assert [(tc.id, tc.name) for tc in msg.tool_calls] == [
        ("call_4_0", "get_balance"),
        ("call_4_1", "get_most_recent_transactions"),
    ]
    off = parse_completion(body, request).message
    assert not off.tool_calls and off.content == f"{BALANCE}\n{RECENT}"


def test_braces_nested_too_deep_for_the_decoder_are_not_a_call():
    assert find_text_calls('{"get_balance": ' * 1500, KNOWN) is None
