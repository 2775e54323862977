"""The contract every chat backend meets: one request in, one assistant message out.

Backends never see condition or method names. What they get is what a model endpoint gets: messages,
tool schemas, sampling parameters and a seed derived from the episode's identity (common random numbers).
"""

from __future__ import annotations

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

    def response_format(self) -> dict[str, Any]:
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": self.json_schema, "strict": True},
        }


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
