"""A shard's partial file: every appended record survives a kill of the writing process, while the
fsyncs that guard against a power loss are grouped (one per ``sync_interval_s``, and one on close)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from pydantic import BaseModel

from evoaudit import jsonl
from evoaudit.jsonl import ShardWriter, partial_path


class Rec(BaseModel):
    rollout_id: str
    n: int


# Appends records with no fsync due (an hour's interval), then dies by SIGKILL before closing the writer.
KILL_AFTER_APPENDS = textwrap.dedent(
    """
    import os, signal, sys
    from pydantic import BaseModel
    from evoaudit.jsonl import ShardWriter
    class Rec(BaseModel):
        rollout_id: str
        n: int
    writer = ShardWriter(sys.argv[1], Rec, sync_interval_s=3600.0)
    for n in range(int(sys.argv[2])):
        writer.append(Rec(rollout_id=f"r{n}", n=n))
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_writer_killed_before_any_fsync_loses_no_appended_record(tmp_path):
    final = tmp_path / "shard0.jsonl"
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER_APPENDS, str(final), "7"], timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not final.exists() and partial_path(final).exists()
    resumed = ShardWriter(final, Rec)
    assert sorted(resumed.done) == sorted(f"r{n}" for n in range(7))
    resumed.close()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_appends_are_fsynced_once_per_interval_and_on_close_not_once_each(tmp_path, monkeypatch):
    clock, synced = _Clock(), []
    monkeypatch.setattr(jsonl.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(jsonl.os, "fsync", lambda fd: synced.append(fd))
    writer = ShardWriter(tmp_path / "shard0.jsonl", Rec, sync_interval_s=1.0)
    for n in range(10):  # within one interval: written and flushed, not yet fsynced
        writer.append(Rec(rollout_id=f"r{n}", n=n))
    assert synced == []
    assert len(partial_path(tmp_path / "shard0.jsonl").read_text().splitlines()) == 10
    clock.now += 1.0
    writer.append(Rec(rollout_id="r10", n=10))  # the interval has passed: one fsync covers all eleven
    assert len(synced) == 1
    writer.append(Rec(rollout_id="r11", n=11))
    writer.close()  # the last record is made durable when the writer closes
    assert len(synced) == 2
