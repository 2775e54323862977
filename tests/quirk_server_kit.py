"""A loopback OpenAI-compatible server that behaves like the servers users run, one quirk at a time.

Each quirk in ``QUIRKS`` is a documented difference between real servers (docs/endpoints.md) and the
plain dialect our simulator speaks. ``QuirkHandler`` answers with a SimBackend (or a fixed read call and
answer) and applies the quirks it was given to requests and answers, so each one can be tested over real
HTTP. It also serves the render endpoints of llama.cpp's server (``/apply-template``, ``/props``) and of
vLLM (``/tokenize`` and ``/detokenize`` with ``messages``), with a template that can drop tool results,
and checks the model name and API key as a hosted endpoint would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evoaudit.models.base import ChatResponse
from evoaudit.models.http import Reply, Request
from evoaudit.models.sim.tools import SimBackend
from evoaudit.models.wire import completion_json, request_from_wire
from evoaudit.records import Message, ToolCall

QUIRKS = {
    # requests
    "needs_tool_choice": "tools are ignored unless the request names tool_choice (llama-cpp-python)",
    "rejects_null_content": "an assistant turn with content null or missing gets a 500 (llama-cpp-python)",
    "json_object_only": "response_format json_schema gets a 500 naming 'text' or 'json_object' "
    "(llama-cpp-python 0.3); json_object gets JSON built from the schema the prompt states",
    "no_response_format": "any response_format gets the 500 of json_object_only (neither form is known)",
    # answers
    "args_object": "tool-call arguments come as a JSON object, not a string (Ollama, some proxies)",
    "missing_ids": "tool calls come without an id",
    "duplicate_ids": "every tool call has the id call_0, in every turn",
    "stop_with_calls": "finish_reason is stop although the answer calls tools",
    "parallel_calls": "a turn that calls a tool also calls get_balance beside it",
    "reasoning_content": "the answer carries reasoning_content (vLLM, SGLang, DeepSeek)",
    "reasoning": "the answer carries reasoning (OpenRouter, newer vLLM)",
    "hermes_text": "tool calls are left in the text as <tool_call>{...}</tool_call>",
    "llama3_text": "tool calls are left in the text as a bare JSON object with parameters",
    "mistral_text": "tool calls are left in the text after [TOOL_CALLS]",
    # rendering
    "render_apply_template": "POST /apply-template renders the prompt (llama.cpp server --jinja)",
    "render_tokenize": "POST /tokenize with messages and /detokenize render the prompt (vLLM, SGLang)",
    "template_drops_tool": "the chat template has no branch for role tool: tool results never render",
}
# llama-cpp-python 0.3's answer to response_format json_schema (its request model knows only these two).
RESPONSE_FORMAT_ERROR = (
    "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be "
    "'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}]"
)
_SCHEMA_IN_PROMPT = re.compile(r"validates against this schema: (\{.*\})\s*$", re.DOTALL)
_NULL_CONTENT_ERROR = (
    "1 validation error for ChatCompletionRequestAssistantMessage\ncontent\n"
    "  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]"
)


@dataclass
class QuirkHandler:
    quirks: Iterable[str] = ()
    responder: SimBackend | None = None
    model: str = "quirk-model"
    api_key: str | None = None  # when set, requests must carry it as a bearer token
    bodies: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.quirks = frozenset(self.quirks)
        unknown = set(self.quirks) - set(QUIRKS)
        if unknown:
            raise ValueError(f"unknown quirks {sorted(unknown)}; known: {sorted(QUIRKS)}")

    def has(self, quirk: str) -> bool:
        return quirk in self.quirks  # type: ignore[operator]

    async def __call__(self, req: Request) -> Reply:
        path = req.path.rstrip("/")
        self.paths.append(f"{req.method} {path}")
        if self.api_key is not None and req.headers.get("authorization") != f"Bearer {self.api_key}":
            return Reply.error(401, "Incorrect API key provided: the key is not valid", "invalid_api_key")
        if req.method == "GET" and path == "/v1/models":
            return Reply.json({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if path == "/v1/chat/completions":
            reply = self._chat(req.json())
            self.statuses.append(reply.status)
            return reply
        if path == "/apply-template" and self.has("render_apply_template"):
            return Reply.json({"prompt": self.render(req.json()["messages"])})
        if path == "/props" and self.has("render_apply_template"):
            name = "chatml-without-tool" if self.has("template_drops_tool") else "chatml"
            return Reply.json({"chat_template": f"{{# {name} #}}"})
        if path == "/tokenize" and self.has("render_tokenize"):
            return Reply.json({"tokens": [ord(c) for c in self.render(req.json()["messages"])]})
        if path == "/detokenize" and self.has("render_tokenize"):
            return Reply.json({"prompt": "".join(chr(t) for t in req.json()["tokens"])})
        return Reply.error(404, f"no route {req.path}", "not_found")

    def render(self, messages: list[dict[str, Any]]) -> str:
        """A ChatML rendering; with ``template_drops_tool``, role tool falls through every branch."""
        out = []
        for m in messages:
            if m.get("role") == "tool" and self.has("template_drops_tool"):
                continue
            content = m.get("content") or ""
            if m.get("tool_calls"):
                content += "".join(
                    f"<tool_call>{json.dumps(tc.get('function'))}</tool_call>" for tc in m["tool_calls"]
                )
            out.append(f"<|im_start|>{m.get('role')}\n{content}<|im_end|>\n")
        return "".join(out) + "<|im_start|>assistant\n"

    def _chat(self, body: dict[str, Any]) -> Reply:
        self.bodies.append(body)
        if body.get("model") != self.model:
            return Reply.error(404, f"The model `{body.get('model')}` does not exist.", "model_not_found")
        if self.has("rejects_null_content"):
            for m in body.get("messages") or []:
                if m.get("role") == "assistant" and not isinstance(m.get("content"), str):
                    return Reply.error(500, _NULL_CONTENT_ERROR, None)
        fmt = (body.get("response_format") or {}).get("type")
        if fmt is not None and (
            self.has("no_response_format") or (fmt == "json_schema" and self.has("json_object_only"))
        ):
            return Reply.error(500, RESPONSE_FORMAT_ERROR, None)
        if fmt == "json_object" and self.has("json_object_only"):
            return self._json_object(body)
        tools_on = bool(body.get("tools"))
        if self.has("needs_tool_choice") and body.get("tool_choice") in (None, "none"):
            tools_on = False
        message, finish = self._answer(body, tools_on)
        data = completion_json(
            ChatResponse(message=message, finish_reason=finish, prompt_tokens=1, completion_tokens=1),
            self.model,
            f"chatcmpl-{len(self.bodies)}",
        )
        self._dress(data["choices"][0], message)
        return Reply.json(data)

    def _json_object(self, body: dict[str, Any]) -> Reply:
        """JSON mode: an instance of the schema the last user message states (``{}`` when it states none),
        as a model that follows the instruction under a JSON grammar writes."""
        last = next(m for m in reversed(body["messages"]) if m.get("role") == "user")
        found = _SCHEMA_IN_PROMPT.search(last.get("content") or "")
        content = json.dumps(_instance(json.loads(found.group(1))) if found else {})
        message = Message(role="assistant", content=content)
        response = ChatResponse(message=message, finish_reason="stop", prompt_tokens=1, completion_tokens=1)
        return Reply.json(completion_json(response, self.model, f"chatcmpl-{len(self.bodies)}"))

    def _answer(self, body: dict[str, Any], tools_on: bool) -> tuple[Message, str]:
        if not tools_on:
            return Message(role="assistant", content="I would need a tool to answer that."), "stop"
        if self.responder is not None:
            r = self.responder.respond(request_from_wire(body))
            message = r.message
        elif not any(m.get("role") == "tool" for m in body.get("messages") or []):
            call = ToolCall(id="call_srv_1", name="get_most_recent_transactions", arguments='{"n": 5}')
            message = Message(role="assistant", tool_calls=[call])
        else:
            message = Message(role="assistant", content="Done.")
        if message.tool_calls and self.has("parallel_calls"):
            extra = ToolCall(id=f"call_srv_{len(self.bodies)}b", name="get_balance", arguments="{}")
            message = message.model_copy(update={"tool_calls": [*message.tool_calls, extra]})
        return message, "tool_calls" if message.tool_calls else "stop"

    def _dress(self, choice: dict[str, Any], message: Message) -> None:
        """Apply the answer quirks to the wire form of one choice."""
        wire = choice["message"]
        calls = wire.get("tool_calls") or []
        for tc in calls:
            if self.has("args_object"):
                tc["function"]["arguments"] = json.loads(tc["function"]["arguments"] or "{}")
            if self.has("missing_ids"):
                tc.pop("id", None)
            if self.has("duplicate_ids"):
                tc["id"] = "call_0"
        if calls and self.has("stop_with_calls"):
            choice["finish_reason"] = "stop"
        if self.has("reasoning_content"):
            wire["reasoning_content"] = "The user wants their data; a read comes first."
        if self.has("reasoning"):
            wire["reasoning"] = "The user wants their data; a read comes first."
        if calls and (text := self._as_text(message.tool_calls)) is not None:
            wire["content"] = text
            wire.pop("tool_calls")
            choice["finish_reason"] = "stop"

    def _as_text(self, calls: list[ToolCall]) -> str | None:
        objs = [{"name": c.name, "arguments": json.loads(c.arguments or "{}")} for c in calls]
        if self.has("hermes_text"):
            return "".join(f"<tool_call>\n{json.dumps(o)}\n</tool_call>" for o in objs)
        if self.has("llama3_text"):
            o = objs[0]
            return json.dumps({"name": o["name"], "parameters": o["arguments"]})
        if self.has("mistral_text"):
            return "[TOOL_CALLS] " + json.dumps(objs)
        return None

    def chat_bodies_with_tool_results(self) -> list[dict[str, Any]]:
        return [b for b in self.bodies if any(m.get("role") == "tool" for m in b.get("messages") or [])]


def _instance(schema: dict[str, Any]) -> Any:
    """A small instance of ``schema`` (the subset the project's schemas use)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema["type"][0] if isinstance(schema["type"], list) else schema["type"]
    if kind == "object":
        return {k: _instance(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [_instance(schema["items"])]
    return {"string": "some words", "boolean": True, "integer": 0, "number": 0.5, "null": None}[kind]
