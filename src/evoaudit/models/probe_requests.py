"""The pre-flight's probe requests (a tool call; an answer under a response schema), shared by the
pre-flight that sends them and the simulator's HTTP server, which answers them as a server whose model
calls tools natively and honours response schemas would."""

from __future__ import annotations

from typing import Any

from evoaudit.models.base import ChatRequest, ChatResponse, ResponseSchema
from evoaudit.records import Message, ToolCall

# Neutral on purpose (nothing like the audited suite's tools), and asked for in so many words, so that a
# model able to call tools at all calls this one.
TOOL_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city, e.g. London"}},
            "required": ["city"],
        },
    },
}
TOOL_PROBE_PROMPT = "What is the weather in Paris right now? Look it up with the get_weather tool."

# A plain question, with no word about JSON: a model the schema does not constrain answers in prose.
STRUCTURED_PROBE_PROMPT = "What is the capital of France?"
STRUCTURED_PROBE_SCHEMA = ResponseSchema(
    name="capital_probe",
    json_schema={
        "type": "object",
        "properties": {"country": {"type": "string"}, "capital": {"type": "string"}},
        "required": ["country", "capital"],
        "additionalProperties": False,
    },
)


def simulated_answer(request: ChatRequest, body: dict[str, Any]) -> ChatResponse | None:
    """The simulator's answer to a probe request, or None for any other request: the tool call, then a
    sentence once its result is back; the probe's JSON when the request carries a response schema."""
    user = next((m.content for m in request.messages if m.role == "user"), None)
    if user == TOOL_PROBE_PROMPT:
        if any(m.role == "tool" for m in request.messages):
            message = Message(role="assistant", content="It is as the tool says.")
        else:
            name = TOOL_PROBE_TOOL["function"]["name"]
            call = ToolCall(id="call_0", name=name, arguments='{"city": "Paris"}')
            message = Message(role="assistant", tool_calls=[call])
    elif user == STRUCTURED_PROBE_PROMPT:
        text = '{"country": "France", "capital": "Paris"}' if body.get("response_format") else "Paris."
        message = Message(role="assistant", content=text)
    else:
        return None
    finish = "tool_calls" if message.tool_calls else "stop"
    return ChatResponse(
        message=message, finish_reason=finish, prompt_tokens=len(user.split()), completion_tokens=4
    )
