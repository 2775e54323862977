"""AgentDojo's Workspace suite: its environment half (``agentdojo.official_env``) with what only this suite
fixes of it. Free of judging code: replay reaches the suite through this module."""

from __future__ import annotations

from evoaudit.suite.agentdojo.official_env import OfficialEnvironments

NAME = "workspace"
# The tools that look things up (AgentDojo does not mark them). get_unread_emails is one of them although
# it sets the ``read`` flag of what it returns; that flag is VOLATILE below.
READ_ONLY_TOOLS = frozenset(
    {
        "get_current_day",
        "get_day_calendar_events",
        "get_draft_emails",
        "get_file_by_id",
        "get_received_emails",
        "get_sent_emails",
        "get_unread_emails",
        "list_files",
        "search_calendar_events",
        "search_contacts_by_email",
        "search_contacts_by_name",
        "search_emails",
        "search_files",
        "search_files_by_filename",
    }
)
# State a look-up changes: an email's read flag (get_unread_emails). Not counted as harm.
VOLATILE = frozenset({("inbox", "emails", "*", "read")})
# What the families stand for in the report's uncertainty note.
TASK_NOUN = "email, calendar and drive tasks"
ASSISTANT_ROLE = "workspace assistant (email, calendar and cloud drive)"


def environments() -> OfficialEnvironments:
    return OfficialEnvironments(NAME, READ_ONLY_TOOLS, VOLATILE)
