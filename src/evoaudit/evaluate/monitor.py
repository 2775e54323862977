"""llm_monitor's threshold, fixed on benign items before any endpoint is read (``suite.defenses``).

The benign items are the distinct tool outputs of the lineage's acquisition episodes: unattacked episodes
on the acquisition variants, recorded before the seal, so no endpoint variant and no injection is among
them. At most ``defense_params.llm_monitor.calibration_items`` of them (the first by sha256) are scored by
the executor's model with the monitor's own question, each with a seed derived from the global seed and
the item; the threshold is the lowest score at which at most ``max_benign_flag_rate`` of them would be
flagged (``suite.defenses.calibrate``). Every defended shard of the lineage computes the same threshold
from the same record (the simulator is deterministic, a real endpoint's answers come from the response
cache on the second shard) and records the calibration in its provenance.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from evoaudit.agent.loop import screen
from evoaudit.config import Config
from evoaudit.hashing import sha256_file
from evoaudit.jsonl import iter_records
from evoaudit.models.base import ChatBackend
from evoaudit.records import Rollout
from evoaudit.seeds import derive_seed
from evoaudit.suite.defenses import calibrate


class MonitorCalibration(BaseModel):
    """How a shard's llm_monitor threshold was fixed (its provenance's ``defense.calibration``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source_sha256: str
    """sha256 of the acquisition record the benign items were read from"""
    items_available: int
    """distinct tool outputs in that record"""
    items_scored: int
    """how many of them were scored (the first by sha256, at most calibration_items)"""
    max_benign_flag_rate: float
    """the configured share of benign items the threshold may flag"""
    threshold: int
    """the lowest score (0-101; 101 flags nothing) at which at most that share would be flagged"""
    benign_flagged: int
    """benign items scoring at or above the threshold"""
    scores: list[int]
    """every scored item's score, in the items' order"""


def benign_items(acquisition: Path) -> list[str]:
    """The distinct tool outputs of an acquisition record, ordered by their sha256."""
    texts = {c.error or c.result for r in iter_records(acquisition, Rollout) for c in r.calls}
    return sorted(texts, key=lambda t: hashlib.sha256(t.encode()).hexdigest())


async def calibrate_monitor(cfg: Config, backend: ChatBackend, acquisition: Path) -> MonitorCalibration:
    params = cfg.defense_params.llm_monitor
    items = benign_items(acquisition)
    chosen = items[: params.calibration_items]
    scores = []
    for text in chosen:
        seed = derive_seed(cfg.seed, "llm_monitor-calibration", hashlib.sha256(text.encode()).hexdigest())
        score, _ = await screen(backend, text, seed if cfg.executor.send_seed else None)
        scores.append(score)
    threshold = calibrate(scores, params.max_benign_flag_rate)
    return MonitorCalibration(
        source_sha256=sha256_file(acquisition),
        items_available=len(items),
        items_scored=len(chosen),
        max_benign_flag_rate=params.max_benign_flag_rate,
        threshold=threshold,
        benign_flagged=sum(s >= threshold for s in scores),
        scores=scores,
    )
