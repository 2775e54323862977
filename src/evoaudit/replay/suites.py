"""Which replay recomputes a rollout: the one its suite's environment half names (``replay_kind``), the
suite looked up by the rollout's instance (``Instance.suite``).

Each is its own code, beside the suite it reads (``recompute``: AgentDojo's Banking through the
environment half and replay's own predicates; ``apex``: APEX-Harm's workspaces; ``official``:
AgentDojo's suites on their official predicates). Imported on first use, so replaying Banking never
loads the APEX suite.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from evoaudit.suite.environments import get_environment

# Keyed by the suite's ``replay_kind`` (its environment half says which recomputation it needs), so
# that a new suite of a known kind adds nothing here.
_REPLAYS = {
    "agentdojo-banking": ("evoaudit.replay.recompute", "replay_rollout"),
    "apex": ("evoaudit.replay.apex", "replay_apex_rollout"),
    # AgentDojo's suites audited on their official predicates (``suite/agentdojo/official.py``).
    "agentdojo-official": ("evoaudit.replay.official", "replay_official_rollout"),
}


@functools.cache
def _kind(suite: str) -> str:
    return get_environment(suite).replay_kind


def replay_for(suite: str) -> Callable[[Any, Any], Any]:
    """The function that replays one rollout of ``suite``: ``(rollout, instance) -> result`` with the
    result's ``mismatches``."""
    kind = _kind(suite)
    try:
        module, name = _REPLAYS[kind]
    except KeyError:
        raise ValueError(
            f"suite {suite!r} asks for replay kind {kind!r}, which replay does not have; "
            f"known: {sorted(_REPLAYS)}"
        ) from None
    return getattr(importlib.import_module(module), name)
