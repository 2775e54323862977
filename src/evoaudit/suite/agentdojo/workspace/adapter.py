"""AgentDojo's Workspace suite as a whole audit (``interface.AuditSuite``): the generic AgentDojo suite
(``agentdojo.official``) with this suite's tool facts (``tools``) and published checker audit (``audit``)."""

from __future__ import annotations

from evoaudit.suite.agentdojo.official import OfficialSuite
from evoaudit.suite.agentdojo.workspace import audit
from evoaudit.suite.agentdojo.workspace.tools import (
    ASSISTANT_ROLE,
    NAME,
    READ_ONLY_TOOLS,
    TASK_NOUN,
    VOLATILE,
)


def suite() -> OfficialSuite:
    return OfficialSuite(NAME, READ_ONLY_TOOLS, audit.suite(), ASSISTANT_ROLE, TASK_NOUN, VOLATILE)
