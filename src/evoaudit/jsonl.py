"""Append-only JSONL shards that survive a crash or a kill.

A shard is written to ``<final>.partial`` one record per line, flushed and fsynced as each record ends;
``finish`` renames it to the final path in one step. A restarted job reads the partial file, drops a
torn last line, and skips every record already there. The final path is what Snakemake sees, so a failed
job never leaves an output that looks complete, and Snakemake never deletes the partial work.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def partial_path(final: str | Path) -> Path:
    final = Path(final)
    return final.with_name(final.name + ".partial")


def read_records(path: str | Path, model: type[M]) -> list[M]:
    return list(iter_records(path, model))


def iter_records(path: str | Path, model: type[M]) -> Iterator[M]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield model.model_validate_json(line)


class ShardWriter:
    def __init__(self, final: str | Path, model: type[M]) -> None:
        self.final = Path(final)
        self.partial = partial_path(self.final)
        self.model = model
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.done: dict[str, M] = {}
        if self.partial.exists():
            self._recover()
        self._fh = open(self.partial, "a", encoding="utf-8")

    def _recover(self) -> None:
        data = self.partial.read_bytes()
        keep = data[: data.rfind(b"\n") + 1]  # a kill mid-write leaves a torn last line
        if len(keep) != len(data):
            with open(self.partial, "r+b") as fh:
                fh.truncate(len(keep))
        for line in keep.decode("utf-8").splitlines():
            if line.strip():
                rec = self.model.model_validate_json(line)
                self.done[rec.rollout_id] = rec

    def append(self, record: M) -> None:
        self._fh.write(record.model_dump_json() + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.done[record.rollout_id] = record

    def finish(self, order: list[str]) -> None:
        """Write the records in ``order`` (ids) to the final path atomically, then drop the partial."""
        self._fh.close()
        tmp = self.final.with_name(self.final.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for rid in order:
                fh.write(self.done[rid].model_dump_json() + "\n")
        os.replace(tmp, self.final)
        self.partial.unlink(missing_ok=True)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()
