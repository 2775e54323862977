"""Which replay recomputes a rollout: one per suite, looked up by the rollout's instance (``Instance.suite``).

Each is its own code, beside the suite it reads (``recompute``: AgentDojo's Banking through the
environment half and replay's own predicates; ``apex``: APEX-Harm's workspaces; ``official``:
AgentDojo's Workspace, Travel and Slack on their official predicates). Imported on first use,
so replaying Banking never loads the APEX suite.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

_REPLAYS = {
    "banking": ("evoaudit.replay.recompute", "replay_rollout"),
    "apex": ("evoaudit.replay.apex", "replay_apex_rollout"),
    # AgentDojo's suites audited on their official predicates (``suite/agentdojo/official.py``).
    "workspace": ("evoaudit.replay.official", "replay_official_rollout"),
    "travel": ("evoaudit.replay.official", "replay_official_rollout"),
    "slack": ("evoaudit.replay.official", "replay_official_rollout"),
}


def replay_for(suite: str) -> Callable[[Any, Any], Any]:
    """The function that replays one rollout of ``suite``: ``(rollout, instance) -> result`` with the
    result's ``mismatches``."""
    try:
        module, name = _REPLAYS[suite]
    except KeyError:
        raise ValueError(f"no replay is registered for suite {suite!r}; known: {sorted(_REPLAYS)}") from None
    return getattr(importlib.import_module(module), name)
