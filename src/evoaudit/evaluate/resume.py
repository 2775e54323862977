"""Which recorded rollouts a restarted job may keep.

A rollout carries a resume key: the sha256 of the artifact it ran with, the executor's identity (backend,
model, base URL, sampling: what does not change by contacting the server), its episode seed and the hash
of the configuration an episode depends on (``config.stage_digest(cfg, "episode")``, the one answer to
which configuration a stage depends on). A restarted job keeps a partial record only when its key equals
the key it would compute now; anything else was produced by another artifact, endpoint or configuration
and is moved aside, never mixed into the new shard.

Rollouts that ended in a transient infrastructure failure (retries exhausted, a server that rejected the
request) are moved aside too, so that a rerun after an outage redoes exactly those; so are harness errors
(an episode our own code failed), so that a rerun after the fix redoes them. Guardrail rejections and
context overflows are answers about the request itself: a rerun would get them again, so they stay.
"""

from __future__ import annotations

from typing import Any

from evoaudit.hashing import sha256_json
from evoaudit.records import Rollout

# Fingerprint fields filled in by contacting the server (or read back from the cache).
CONTACT_FIELDS = frozenset(
    {"source", "served_models", "server_version", "models_error", "render_probe", "wire", "structured_output"}
)
# Infrastructure failures a rerun may cure: an outage's, and a harness error's once its cause is fixed.
# Each counts against evaluation.max_excluded_share, so a shard many of them hit is not published.
RECOVERABLE_FAILURES = ("retries_exhausted", "request_rejected", "harness_error")


def executor_identity(fingerprint: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fingerprint.items() if k not in CONTACT_FIELDS}


def resume_key(artifact_sha256: str | None, executor: dict[str, Any], seed: int, sections_sha256: str) -> str:
    return sha256_json(
        {
            "artifact_sha256": artifact_sha256,
            "executor": executor_identity(executor),
            "seed": seed,
            "config": sections_sha256,
        }
    )


def aside_reason(
    record: Rollout,
    expected_key: str | None,
    artifact_sha256: str | None,
    executor: dict[str, Any],
    seed: int | None,
) -> tuple[str, str] | None:
    """(``stale`` or ``infra``, why) when a recorded rollout must be redone, None when it may be kept."""
    if expected_key is None:
        return "stale", "not part of this shard any more"
    if record.resume_key != expected_key:
        if record.resume_key is None:
            why = "recorded without a resume key"
        elif record.artifact_sha256 != artifact_sha256:
            why = "the artifact changed"
        elif executor_identity(record.executor) != executor_identity(executor):
            why = "the executor endpoint or its sampling changed"
        elif record.seed != seed:
            why = "the episode seed changed"
        else:
            why = "the configuration the episode depends on changed"
        return "stale", why
    if record.outcome.infra_failure in RECOVERABLE_FAILURES:
        return "infra", f"infrastructure failure {record.outcome.infra_failure}"
    return None
