"""One stage's planned counts (``StagePlan``) and the structured-output probe's requests (``probe_requests``):
shared by the plan (``plan.py``) and its APEX-Harm part (``apex/plan.py``), kept apart so that neither
imports the other."""

from __future__ import annotations

from dataclasses import dataclass

from evoaudit.config import EndpointConfig


@dataclass
class StagePlan:
    stage: str
    jobs: int = 0
    rollouts: int = 0
    rollouts_left: int = 0
    requests: float = 0.0
    requests_left: float = 0.0
    tokens: float = 0.0
    tokens_left: float = 0.0


def probe_requests(endpoint: EndpointConfig) -> int:
    """Requests a job adds before its first request with a response schema on ``endpoint``: the
    structured-output probe, sent by every job process under ``auto`` (``on`` and ``off`` send none)."""
    return int(endpoint.backend == "openai" and endpoint.wire.structured_output == "auto")
