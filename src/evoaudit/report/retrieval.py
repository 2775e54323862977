"""What each ReasoningBank episode retrieved, recomputed from its frozen artifact.

Retrieval is a pure function of the artifact and the episode's task query (its opening user message),
so the report can say whether an episode saw success- or failure-derived memory without the rollout
recording it. Only done with the local embedder: an endpoint embedder would have to be called again.
"""

from __future__ import annotations

import logging
from pathlib import Path

from evoaudit.records import Rollout

log = logging.getLogger(__name__)


def _query(r: Rollout) -> str | None:
    return next((msg.content for msg in r.messages if msg.role == "user" and msg.content), None)


def retrieved_provenance(rollouts: list[Rollout], artifact_dirs: dict[str, Path]) -> dict[str, str]:
    """{rollout id: 'success' | 'failure' | 'mixed' | 'none'} for reasoningbank rollouts.

    ``artifact_dirs`` maps a lineage to its reasoningbank artifact directory.
    """
    from evoaudit.methods import reasoningbank

    out: dict[str, str] = {}
    retrievers: dict[str, reasoningbank.Retriever | None] = {}
    for r in rollouts:
        if r.condition != "reasoningbank" or r.lineage not in artifact_dirs:
            continue
        if r.lineage not in retrievers:
            bank_file = artifact_dirs[r.lineage] / reasoningbank.BANK_FILE
            bank = reasoningbank.Bank.model_validate_json(bank_file.read_text())
            if bank.embedder.backend != "local":
                # Re-embedding queries would call the endpoint again: leave these episodes untraced.
                log.info("retrieval provenance: %s uses an endpoint embedder; not recomputed", r.lineage)
                retrievers[r.lineage] = None
            else:
                retrievers[r.lineage] = reasoningbank.Retriever(artifact_dirs[r.lineage])
        retriever, query = retrievers[r.lineage], _query(r)
        if retriever is None or query is None:
            continue
        kinds = sorted({item.provenance for entry, _ in retriever.retrieve(query) for item in entry.items})
        out[r.rollout_id] = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "none")
    return out
