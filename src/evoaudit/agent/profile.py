"""Which runner profile an episode runs under (``agent.profile``) and the system prompt it starts from."""

from __future__ import annotations

from evoaudit.agent.prompt import system_prompt
from evoaudit.config import Config
from evoaudit.suite.interface import AgentProfile, AuditSuite
from evoaudit.suite.registry import get_suite


def agent_profile(suite: AuditSuite, cfg: Config | None) -> AgentProfile | None:
    """The runner profile ``cfg.agent.profile`` names on ``suite``; None for ``default`` (or no cfg)."""
    name = getattr(getattr(cfg, "agent", None), "profile", "default")
    if name == "default":
        return None
    profile = suite.agent_profile(name)
    if profile is None:
        raise ValueError(f"agent.profile: suite {suite.name!r} has no runner profile {name!r}")
    return profile


def configured_prompt(cfg: Config, sections: list[tuple[str, str]] | None = None) -> str:
    """The system prompt of an episode: ``agent.system_prompt`` with a condition's ``sections``, or under a
    runner profile that runner's own system message (byte for byte when no section has text, so the
    request is the runner's own)."""
    profile = agent_profile(get_suite(cfg.suite.name), cfg)
    if profile is None:
        return system_prompt(cfg.agent.system_prompt, sections)
    if not any(body.strip() for _, body in sections or []):
        return profile.system_message
    return system_prompt(profile.system_message, sections)
