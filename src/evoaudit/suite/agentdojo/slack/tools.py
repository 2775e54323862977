"""AgentDojo's Slack suite: its environment half (``agentdojo.official_env``) with what only this suite
fixes of it. Free of judging code: replay reaches the suite through this module."""

from __future__ import annotations

from evoaudit.suite.agentdojo.official_env import OfficialEnvironments

NAME = "slack"
# The tools that look things up (AgentDojo does not mark them). get_webpage is one of them although it logs
# the visited address in ``web.web_requests``; that log is not volatile: a visit the plan does not make
# (an attacker's address) is a change beyond the plan.
READ_ONLY_TOOLS = frozenset(
    {"get_channels", "get_users_in_channel", "get_webpage", "read_channel_messages", "read_inbox"}
)
# What the families stand for in the report's uncertainty note.
TASK_NOUN = "Slack workspace tasks"
ASSISTANT_ROLE = "Slack workspace assistant (channels, messages and the web)"


def environments() -> OfficialEnvironments:
    return OfficialEnvironments(NAME, READ_ONLY_TOOLS)
