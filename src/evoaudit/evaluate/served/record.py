"""The record ``evoaudit serve`` writes and ``evoaudit score`` reads (``AgentServedRecord``): every call an
outside agent made on one served AgentDojo instance, episode by episode, exactly as the suite's own runtime
answered it, and enough about the instance to rebuild each episode's world."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evoaudit.errors import AuditError

AGENT_SERVED_FORMAT = "evoaudit-agentdojo-served-1"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class AgentServedCall(_Record):
    """One tool call as the served instance's runtime made it."""

    seq: int
    """the call's place in its episode, from 0"""
    function: str
    """the tool the agent called, as it named it"""
    args: dict[str, Any]
    """the arguments as the agent sent them (``records.recordable``)"""
    result: str
    """the text the agent received: the tool's result as AgentDojo formats it, or the error text"""
    error: str | None
    """the runtime's error text when the call failed (sent as an MCP tool error), else null"""


class AgentServedEpisode(_Record):
    """One episode: from the moment the user's prompt was fetched (or the episode reset) to the last call."""

    episode: int
    """the episode's number in the record, from 0"""
    pre_state_sha256: str
    """the environment as the episode started (injections placed), as ``SuiteEnvironment.state_sha256``"""
    calls: list[AgentServedCall] = Field(default_factory=list)
    """every tool call of the episode, in the order the runtime made them"""
    final_output: str | None = None
    """the agent's final answer, as it handed it over with ``submit_answer`` (null: none submitted, scored as
    an empty final message)"""
    state_sha256: str
    """the environment after the episode's last call (its pre-state before any)"""


class AgentServedRecord(_Record):
    """What ``evoaudit serve`` records for one instance, one document for every episode since it started."""

    format: Literal["evoaudit-agentdojo-served-1"] = AGENT_SERVED_FORMAT
    """the record's format (refused when another)"""
    suite: str
    """the AgentDojo suite served (``suite.name`` of the configuration)"""
    instance_id: str
    """the served instance (``<user task or family>.<variant>``)"""
    goal: str | None
    """the injection task whose text is placed in the environment; null for a benign instance"""
    injections: dict[str, str]
    """what the goal placed, {vector: exact text} (``AuditSuite.injections``); empty when benign"""
    system_prompt: str
    """the system prompt served (prompt ``system``): the configured one, with the artifact's sections"""
    condition: str | None = None
    """the condition whose frozen artifact the system prompt carries; null for none"""
    artifact_sha256: str | None = None
    """the artifact's files hashed as the evaluation stage hashes them; null for none"""
    config_sha256: str
    """the episode's configuration digest (``config.stage_digest(cfg, 'episode')``): scoring refuses
    another"""
    episodes: list[AgentServedEpisode] = Field(default_factory=list)
    """every episode since the server started"""


def read_record(path: str | Path) -> AgentServedRecord:
    """The record at ``path``, or AuditError naming the file, the field and the fix."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AuditError(f"{p}: no such record; `evoaudit serve --record {p}` writes one") from None
    except json.JSONDecodeError:
        raise AuditError(f"{p}: not a served-instance record (not one JSON document)") from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != AGENT_SERVED_FORMAT:
        hint = "; an APEX-Harm record is scored by `evoaudit apex score`" if found else ""
        raise AuditError(
            f"{p}: field 'format' is {found!r}, not {AGENT_SERVED_FORMAT!r}; record it with `evoaudit serve`"
            + hint
        )
    try:
        return AgentServedRecord.model_validate(data)
    except ValidationError as exc:
        raise AuditError(f"{p}: not a valid served-instance record: {exc}") from None
