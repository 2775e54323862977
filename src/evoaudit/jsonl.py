"""Append-only JSONL shards that survive a crash or a kill.

A shard is written to ``<final>.partial`` one record per line, flushed to the operating system as each
record ends, so a killed process (SIGKILL, a time limit) loses no finished record: the kernel holds what
was written. The fsyncs that make it survive a power loss or a kernel crash are grouped: one when at least
``SYNC_INTERVAL_S`` has passed since the last, and one when the writer closes. A power loss can thus cost
the records appended in the last ``SYNC_INTERVAL_S`` before it (more only when the kernel had not yet
written back those appended before a pause in a long episode); they are run again on restart, like any
unfinished rollout. ``finish`` publishes the shard to the final path in one step.

A restarted job reads the partial file, drops a torn last line, and skips every record already there,
except those its ``aside`` rule rejects: these are appended to ``<stem>.<kind>.jsonl`` next to the shard
(``stale``: made under another artifact, endpoint or configuration; ``infra``: a transient infrastructure
failure to redo), logged with their count and reason, and removed from the partial file before any new
record is written. The final path is what Snakemake sees, so a failed job never leaves an output that
looks complete, and Snakemake never deletes the partial work.

A record model's ``TIMING_FIELDS`` (a rollout's wall time) stay in the partial file, so a resumed job keeps
them, but the published shard leaves them out: they go to ``<stem>.timing.tsv`` beside it. Two runs of the
same configuration then publish byte-identical shards, and whatever hashes a shard hashes content only.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from evoaudit import atomic

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
ASIDE_KINDS = ("stale", "infra")
# Not .jsonl: every glob over shards (*.jsonl, *.jsonl*) passes it by.
TIMING_SUFFIX = ".timing.tsv"
# The longest a written record waits for its fsync while records keep coming (module docstring). One fsync
# costs a few milliseconds, several times a fast rollout's own cost; a second bounds what a power loss can
# take while keeping the fsyncs far below one per rollout.
SYNC_INTERVAL_S = 1.0


def partial_path(final: str | Path) -> Path:
    final = Path(final)
    return final.with_name(final.name + ".partial")


def aside_path(final: str | Path, kind: str) -> Path:
    """Where records moved aside from the shard ``final`` go: ``shard0.jsonl`` -> ``shard0.stale.jsonl``."""
    final = Path(final)
    return final.with_name(f"{final.name.removesuffix('.jsonl')}.{kind}.jsonl")


def timing_path(final: str | Path) -> Path:
    """The timing file of the shard ``final``: ``shard0.jsonl`` -> ``shard0.timing.tsv``."""
    final = Path(final)
    return final.with_name(final.name.removesuffix(".jsonl") + TIMING_SUFFIX)


def read_timing(final: str | Path) -> dict[str, dict[str, float]]:
    """Timing fields by record id, as the shard's timing file holds them; empty when there is none."""
    path = timing_path(final)
    if not path.exists():
        return {}
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        return {}
    header = lines[0].split("\t")
    return {
        cells[0]: {name: float(v) for name, v in zip(header[1:], cells[1:], strict=True)}
        for cells in (line.split("\t") for line in lines[1:] if line)
    }


def is_aside(path: str | Path) -> bool:
    return any(Path(path).name.endswith(f".{kind}.jsonl") for kind in ASIDE_KINDS)


def move_aside(final: str | Path, records: list[tuple[str, str, str]]) -> None:
    """Append (kind, reason, json line) records to the shard's aside files, durably."""
    for kind in sorted({k for k, _, _ in records}):
        with open(aside_path(final, kind), "a", encoding="utf-8") as fh:
            fh.writelines(line + "\n" for k, _, line in records if k == kind)
            fh.flush()
            os.fsync(fh.fileno())
    for (kind, reason), n in sorted(Counter((k, r) for k, r, _ in records).items()):
        log.warning("%s: moved %d rollouts aside to %s: %s", final, n, aside_path(final, kind).name, reason)


def read_records(path: str | Path, model: type[M]) -> list[M]:
    return list(iter_records(path, model))


def iter_records(path: str | Path, model: type[M]) -> Iterator[M]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield model.model_validate_json(line)


class ShardWriter:
    """``aside(record)`` gives (kind, reason) for a recovered record that must not be kept, else None."""

    def __init__(
        self,
        final: str | Path,
        model: type[M],
        aside: Callable[[M], tuple[str, str] | None] | None = None,
        sync_interval_s: float = SYNC_INTERVAL_S,
    ) -> None:
        self.final = Path(final)
        self.sync_interval_s = sync_interval_s
        self.partial = partial_path(self.final)
        self.model = model
        self.aside = aside
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.done: dict[str, M] = {}
        self.moved: Counter[str] = Counter()
        if self.partial.exists():
            self._recover()
        self._fh = open(self.partial, "a", encoding="utf-8")
        self._synced_at = time.monotonic()
        self._unsynced = 0

    def _recover(self) -> None:
        data = self.partial.read_bytes()
        keep = data[: data.rfind(b"\n") + 1]  # a kill mid-write leaves a torn last line
        kept: list[str] = []
        moved: list[tuple[str, str, str]] = []
        for line in keep.decode("utf-8").splitlines():
            if line.strip():
                rec = self.model.model_validate_json(line)
                why = self.aside(rec) if self.aside is not None else None
                if why is None:
                    self.done[rec.rollout_id] = rec
                    kept.append(line)
                else:
                    moved.append((why[0], why[1], line))
        if moved:
            # Aside first, then the partial rewritten atomically: a kill in between leaves a record in
            # both, and the next start moves it aside again (never into the shard).
            move_aside(self.final, moved)
            atomic.write_text(self.partial, "".join(line + "\n" for line in kept))
            self.moved.update(k for k, _, _ in moved)
        elif len(keep) != len(data):
            with open(self.partial, "r+b") as fh:
                fh.truncate(len(keep))

    def append(self, record: M) -> None:
        """Write ``record`` as one line and hand it to the operating system (it survives a kill of this
        process); fsync when ``sync_interval_s`` has passed since the last fsync."""
        self._fh.write(record.model_dump_json() + "\n")
        self._fh.flush()
        self._unsynced += 1
        self.done[record.rollout_id] = record
        if time.monotonic() - self._synced_at >= self.sync_interval_s:
            self.sync()

    def sync(self) -> None:
        """Make every record appended so far durable (fsync), if any is not yet."""
        if self._unsynced and not self._fh.closed:
            os.fsync(self._fh.fileno())
        self._unsynced = 0
        self._synced_at = time.monotonic()

    def finish(self, order: list[str]) -> None:
        """Write the records in ``order`` (ids) to the final path atomically, their timing fields to the
        timing file (first, so a published shard always has its timing beside it), then drop the partial.
        The partial file is closed without an fsync of its own: the published files are fsynced."""
        self._fh.close()
        timing: tuple[str, ...] = getattr(self.model, "TIMING_FIELDS", ())
        if timing:
            rows = ["\t".join(("rollout_id", *timing))]
            for rid in order:
                rec = self.done[rid]
                rows.append("\t".join((rid, *(repr(float(getattr(rec, f) or 0.0)) for f in timing))))
            atomic.write_text(timing_path(self.final), "".join(r + "\n" for r in rows))
        body = "".join(self.done[rid].model_dump_json(exclude=set(timing)) + "\n" for rid in order)
        atomic.write_text(self.final, body)
        self.partial.unlink(missing_ok=True)

    def close(self) -> None:
        """Fsync what is not yet durable, then close the partial file."""
        if not self._fh.closed:
            self.sync()
            self._fh.close()
