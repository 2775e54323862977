"""What each episode of a retrieving method (ReasoningBank) retrieved, recomputed from its frozen artifact.

Retrieval is a pure function of the artifact and the episode's task query (its opening user message),
so the report can say whether an episode saw success- or failure-derived memory without the rollout
recording it. Only done with the local embedder: an endpoint embedder would have to be called again.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from evoaudit.records import Rollout

log = logging.getLogger(__name__)


def _query(r: Rollout) -> str | None:
    return next((msg.content for msg in r.messages if msg.role == "user" and msg.content), None)


def retrieved_provenance(
    rollouts: list[Rollout], artifact_dirs: dict[tuple[str, str], Path]
) -> dict[str, str]:
    """{rollout id: 'success' | 'failure' | 'mixed' | 'none'} for rollouts of a condition whose method
    retrieves per task (``Method.retrieves``; placebos left out).

    ``artifact_dirs`` maps (lineage, method) to the method's artifact directory.
    """
    from evoaudit.methods.conditions import condition
    from evoaudit.methods.registry import get_method

    out: dict[str, str] = {}
    deployed: dict[tuple[str, str], Any] = {}
    for r in rollouts:
        cond = condition(r.condition)
        key = (r.lineage, cond.method)
        if cond.is_placebo or key not in artifact_dirs or not get_method(cond.method).retrieves:
            continue
        if key not in deployed:
            insertion = get_method(cond.method).deploy(artifact_dirs[key], cond.transform)
            if not insertion.retraceable:
                log.info("retrieval provenance: %s/%s uses an endpoint embedder; not recomputed", *key)
                insertion = None
            deployed[key] = insertion
        insertion, query = deployed[key], _query(r)
        if insertion is None or query is None:
            continue
        record = insertion.retrieval(query) or {}
        kinds = sorted(set(record.get("provenance") or []))
        out[r.rollout_id] = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "none")
    return out
