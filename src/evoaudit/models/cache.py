"""Persistent response cache (SQLite) for the ``openai`` backend.

The key is the sha256 of the full request as sent: base URL, model, messages, tools, sampling parameters,
seed and extra body. A rerun or a resumed job therefore answers every repeated request from disk and
costs no endpoint calls; anything that changes the request misses. Infrastructure failures are never
stored. The first answer stored under a key is the one every caller records (``put`` returns it), so an
identical request answered twice, differently, cannot leave a record that its rerun contradicts.
Several jobs may share one file (WAL mode, busy timeout), as parallel Snakemake jobs do.

The event loop never waits on SQLite: the backend calls ``aget``/``aput``, which run in a worker thread
(one connection, guarded by a lock). A database another job holds locked is retried with backoff for
about ``LOCK_BUDGET_S`` and then reported as a CacheError naming the file, never a silent hang.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoaudit.errors import AuditError

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 2.0  # SQLite's own wait per statement
LOCK_BUDGET_S = 30.0  # our retries on top, with backoff, before the job is told

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    base_url TEXT NOT NULL,
    model TEXT NOT NULL,
    response TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created REAL NOT NULL
)
"""


_LOOKUP = "SELECT response, fingerprint FROM responses WHERE key = ?"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)


def _locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def request_key(base_url: str, body: dict[str, Any]) -> str:
    blob = json.dumps({"base_url": base_url, "body": body}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0


class ResponseCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise CacheError(
                f"response cache {self.path}: cannot open it as SQLite ({exc}); delete the file or set "
                "executor.cache_path to another location"
            ) from exc
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self.lock_budget_s = LOCK_BUDGET_S

    def _run(self, what: str, op: Callable[[], Any]) -> Any:
        """``op`` under the connection lock, retried with backoff while another job holds the database."""
        deadline = time.monotonic() + self.lock_budget_s
        delay = 0.05
        while True:
            try:
                with self._lock:
                    return op()
            except sqlite3.OperationalError as exc:
                if not _locked(exc):
                    raise CacheError(f"response cache {self.path}: {what} failed: {exc}") from exc
                if time.monotonic() + delay > deadline:
                    raise CacheError(
                        f"response cache {self.path}: {what}: the database stayed locked for "
                        f"{self.lock_budget_s:g} s ({exc}); another process holds it. Let that job finish, "
                        "or give this one its own executor.cache_path"
                    ) from exc
                log.warning("response cache %s locked during %s; retrying in %.2f s", self.path, what, delay)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def aget(self, key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        return await asyncio.to_thread(self.get, key)

    async def aput(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """``put``, in a worker thread."""
        return await asyncio.to_thread(self.put, *args, **kwargs)

    def get(self, key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(response, fingerprint of the endpoint that produced it), or None."""
        row = self._run("a lookup", lambda: self._db.execute(_LOOKUP, (key,)).fetchone())
        if row is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return json.loads(row[0]), json.loads(row[1])

    def put(
        self,
        key: str,
        base_url: str,
        model: str,
        response: dict[str, Any],
        fingerprint: dict[str, Any],
        *,
        stale: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """Store ``response`` unless the key already holds one, and return what the key holds.

        The first answer written wins: two jobs (or two episodes of one job) that sent the same request
        at once may get different answers, and each must record the one a rerun will read back. An entry
        whose fingerprint ``stale`` rejects (another server build answered it) is replaced instead."""
        fp = json.dumps(fingerprint, sort_keys=True)
        row = (key, base_url, model, json.dumps(response), fp, time.time())

        def op() -> dict[str, Any]:
            # One write transaction, so no other process writes between the lookup and the insert.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                old = self._db.execute(_LOOKUP, (key,)).fetchone()
                if old is not None and not (stale is not None and stale(json.loads(old[1]))):
                    self._db.execute("COMMIT")
                    return json.loads(old[0])
                self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)", row)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # SQLite may have rolled back itself (a full disk, an I/O error)
                    self._db.execute("ROLLBACK")
                raise
            self.stats.writes += 1
            return response

        return self._run("a write", op)

    def summary(self) -> dict[str, Any]:
        """What the file holds: entries per (base_url, model) and its size on disk."""
        rows = self._db.execute(
            "SELECT base_url, model, COUNT(*) FROM responses GROUP BY base_url, model ORDER BY 1, 2"
        ).fetchall()
        return {
            "path": self.path.as_posix(),
            "bytes": self.path.stat().st_size if self.path.exists() else 0,
            "entries": sum(r[2] for r in rows),
            "by_endpoint": [{"base_url": r[0], "model": r[1], "entries": r[2]} for r in rows],
        }

    def rows(self) -> list[dict[str, Any]]:
        """Every entry in key order, without its write time: what an audit bundle carries (its content is
        the same whenever the same answers were cached, whatever the order or time they were written)."""
        sql = "SELECT key, base_url, model, response, fingerprint FROM responses ORDER BY key"
        return [
            {"key": k, "base_url": b, "model": m, "response": json.loads(r), "fingerprint": json.loads(f)}
            for k, b, m, r, f in self._db.execute(sql).fetchall()
        ]

    def clear(self) -> int:
        n = self._db.execute("DELETE FROM responses").rowcount
        self._db.execute("VACUUM")
        return n

    def close(self) -> None:
        self._db.close()


class CacheError(AuditError):
    pass
