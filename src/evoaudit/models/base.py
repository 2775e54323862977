"""The contract every chat backend meets: one request in, one assistant message out.

Backends never see condition or method names. What they get is what a model endpoint gets: messages,
tool schemas, sampling parameters and a seed derived from the episode's identity (common random numbers).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from evoaudit.records import Message


class ResponseSchema(BaseModel):
    """The JSON Schema an answer must meet, for servers that constrain generation to it (structured
    output). ``name`` names the request kind; the schema is defined beside the parser that checks the
    answer. Sent as ``response_format`` only where ``wire.structured_output`` turns it on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    json_schema: dict[str, Any]

    @classmethod
    def of(cls, spec: dict[str, Any]) -> ResponseSchema:
        """From the plain ``{"name": ..., "schema": ...}`` form the suite layer defines."""
        return cls(name=spec["name"], json_schema=spec["schema"])

    def response_format(self, form: str = "json_schema") -> dict[str, Any]:
        """The ``response_format`` field of ``form`` (``STRUCTURED_FORMS``): the schema itself
        (``json_schema``, strict), or JSON of any shape (``json_object``, the schema going in the prompt)."""
        if form == "json_object":
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": self.json_schema, "strict": True},
        }

    def prompt_note(self) -> str:
        """The schema as an instruction, for the forms that carry it in the prompt (``json_object``,
        ``prompt``)."""
        schema = json.dumps(self.json_schema, sort_keys=True, separators=(",", ":"))
        return f"Answer with one JSON object, and nothing else, that validates against this schema: {schema}"


# How a request that expects a JSON answer carries its schema (``wire.structured_output``): as
# ``response_format`` json_schema; as ``response_format`` json_object with the schema in the prompt; or in the
# prompt alone. ``auto`` takes the first form the server honours (``models.preflight``), the last without a
# probe; ``on`` sends the first only.
STRUCTURED_FORMS = ("json_schema", "json_object", "prompt")


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()
    seed: int | None = None
    # The schema of the JSON answer this request expects, if any; the simulator ignores it.
    response_schema: ResponseSchema | None = None
    # "none": the model must answer in text although tools are listed (the tool filter's question); None
    # leaves it to the endpoint's wire settings, and then nothing is added to the request.
    tool_choice: Literal["none"] | None = None
    # The messages as a benchmark runner's own client sends them (``agent.profile`` other than default),
    # in that client's wire shape; the ``openai`` backend then sends them, the tools and that client's
    # sampling (``OpenAIBackend.request_body``) instead of its own. The simulator reads ``messages``.
    runner_messages: tuple[dict[str, Any], ...] | None = None
    # With ``runner_messages``: the runner's own client building its body, ``(model, messages, tools,
    # temperature) -> body`` (``interface.AgentProfile.request_body``); left out of every dump.
    runner_body: Callable[..., dict[str, Any]] | None = Field(default=None, exclude=True)


class ChatResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: Message
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False


class InfraFailure(Exception):
    """The endpoint, not the agent, failed. ``kind`` is one of INFRA_FAILURE_KINDS."""

    def __init__(self, kind: str, detail: str) -> None:
        if kind not in INFRA_FAILURE_KINDS:
            raise ValueError(f"unknown infrastructure failure kind {kind!r}; known: {INFRA_FAILURE_KINDS}")
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


INFRA_FAILURE_KINDS = ("retries_exhausted", "guardrail_rejection", "context_overflow", "request_rejected")


class ChatBackend(Protocol):
    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the served model and sampling, for provenance. Never a secret."""
        ...


class Fingerprint(BaseModel):
    backend: str
    model: str
    base_url: str | None = None
    served_models: list[str] = Field(default_factory=list)
    server_version: str | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)
