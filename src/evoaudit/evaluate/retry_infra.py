"""``evoaudit retry-infra``: send the infrastructure-failed rollouts of published shards back to be redone.

For each published shard with rollouts that ended in a transient infrastructure failure (an outage, a
server bug) or a harness error (``evaluate.resume.RECOVERABLE_FAILURES``), those rollouts are appended to
the shard's ``.infra.jsonl`` file, the others become the shard's partial file, and the published shard
is removed. Rerunning the same ``snakemake`` command then recreates the shard, and the resumed job redoes
exactly the rollouts moved aside (guardrail rejections and context overflows stay: a rerun would get them
again).
"""

from __future__ import annotations

from pathlib import Path

from evoaudit import atomic
from evoaudit.errors import AuditError
from evoaudit.evaluate.resume import RECOVERABLE_FAILURES
from evoaudit.jsonl import is_aside, iter_records, move_aside, partial_path, read_timing
from evoaudit.records import Rollout


def published_shards(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += [p for p in sorted(path.rglob("*.jsonl")) if not is_aside(p)]
        elif path.is_file() and path.suffix == ".jsonl" and not is_aside(path):
            found.append(path)
        else:
            raise AuditError(f"retry-infra: {path} is neither a directory nor a published .jsonl shard")
    return found


def retry_infra(paths: list[Path], dry_run: bool = False) -> dict[str, int]:
    """Rollouts moved aside per shard (only shards that had any)."""
    moved: dict[str, int] = {}
    for shard in published_shards(paths):
        timing = read_timing(shard)
        keep: list[str] = []
        aside: list[tuple[str, str, str]] = []
        for rec in iter_records(shard, Rollout):
            # The partial file holds whole records again: wall times rejoin them from the timing file.
            line = rec.model_copy(update=timing.get(rec.rollout_id, {})).model_dump_json()
            kind = rec.outcome.infra_failure
            if kind in RECOVERABLE_FAILURES:
                aside.append(("infra", f"infrastructure failure {kind}, to be redone (retry-infra)", line))
            else:
                keep.append(line)
        if not aside:
            continue
        moved[shard.as_posix()] = len(aside)
        if dry_run:
            continue
        # Aside first, then the partial, then the shard goes: a kill at any point loses no rollout.
        move_aside(shard, aside)
        atomic.write_text(partial_path(shard), "".join(line + "\n" for line in keep))
        shard.unlink()
    return moved
