"""The response cache off the event loop: a database another process holds locked is retried, then
reported, and the loop keeps running meanwhile."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest

from evoaudit.models import cache as cache_mod
from evoaudit.models.cache import CacheError, ResponseCache


def _hold_lock(path, seconds: float) -> threading.Thread:
    ready = threading.Event()

    def hold():
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN EXCLUSIVE")
        ready.set()
        time.sleep(seconds)
        db.execute("COMMIT")
        db.close()

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    ready.wait(5)
    return t


async def _ticking_while(coro, every_s: float = 0.05) -> tuple[object, int]:
    ticks = 0
    done = False

    async def tick():
        nonlocal ticks
        while not done:
            await asyncio.sleep(every_s)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        result = await coro
    except Exception as exc:  # returned, so the caller can check both the error and the ticks
        result = exc
    done = True
    await ticker
    return result, ticks


def test_a_briefly_locked_database_is_waited_for_without_blocking_the_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "BUSY_TIMEOUT_S", 0.1)
    cache = ResponseCache(tmp_path / "c.sqlite")
    holder = _hold_lock(cache.path, 1.0)
    result, ticks = asyncio.run(_ticking_while(cache.aput("k", "u", "m", {"a": 1}, {"f": 1})))
    holder.join()
    assert result == {"a": 1} and cache.get("k") == ({"a": 1}, {"f": 1})
    assert ticks >= 8  # the loop ran all along (1 s at 50 ms a tick)


def test_a_database_locked_past_the_budget_is_reported_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "BUSY_TIMEOUT_S", 0.1)
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.lock_budget_s = 0.5
    holder = _hold_lock(cache.path, 2.0)
    result, ticks = asyncio.run(_ticking_while(cache.aput("k", "u", "m", {"a": 1}, {"f": 1})))
    holder.join()
    assert isinstance(result, CacheError)
    assert str(cache.path) in str(result) and "locked" in str(result) and "cache_path" in str(result)
    assert ticks >= 5


def test_a_cache_that_is_not_sqlite_is_refused_with_the_fix(tmp_path):
    bad = tmp_path / "c.sqlite"
    bad.write_bytes(b"not a database" * 100)
    with pytest.raises(CacheError, match="cache_path"):
        ResponseCache(bad)
