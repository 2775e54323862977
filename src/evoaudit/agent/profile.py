"""Which runner profile an episode runs under (``agent.profile``) and the system prompt it starts from."""

from __future__ import annotations

from evoaudit.agent.prompt import system_prompt
from evoaudit.config import AgentConfig, Config
from evoaudit.suite.interface import AgentProfile, AuditSuite
from evoaudit.suite.registry import get_suite


def agent_profile(suite: AuditSuite, agent: AgentConfig | None) -> AgentProfile | None:
    """The runner profile ``agent.profile`` names on ``suite``; None for ``default`` (or no section)."""
    name = agent.profile if agent is not None else "default"
    if name == "default":
        return None
    profile = suite.agent_profile(name)
    if profile is None:
        raise ValueError(f"agent.profile: suite {suite.name!r} has no runner profile {name!r}")
    return profile


def configured_prompt(cfg: Config, sections: list[tuple[str, str]] | None = None) -> str:
    """The system prompt of an episode of ``cfg``'s suite (``agent_prompt``)."""
    return agent_prompt(get_suite(cfg.suite.name), cfg.agent, sections)


def agent_prompt(suite: AuditSuite, agent: AgentConfig, sections: list[tuple[str, str]] | None = None) -> str:
    """The system prompt of an episode on ``suite``: ``agent.system_prompt`` with a condition's
    ``sections``, or under a runner profile that runner's own system message (byte for byte when no section
    has text, so the request is the runner's own)."""
    profile = agent_profile(suite, agent)
    if profile is None:
        return system_prompt(agent.system_prompt, sections)
    if not any(body.strip() for _, body in sections or []):
        return profile.system_message
    return system_prompt(profile.system_message, sections)
