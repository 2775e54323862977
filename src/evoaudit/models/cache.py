"""Persistent response cache (SQLite) for the ``openai`` backend.

The key is the sha256 of the full request as sent: base URL, model, messages, tools, sampling parameters,
seed and extra body. A rerun or a resumed job therefore answers every repeated request from disk and
costs no endpoint calls; anything that changes the request misses. Infrastructure failures are never
stored. Several jobs may share one file (WAL mode, busy timeout), as parallel Snakemake jobs do.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evoaudit.errors import AuditError

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


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)


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
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise CacheError(
                f"response cache {self.path}: cannot open it as SQLite ({exc}); delete the file or set "
                "executor.cache_path to another location"
            ) from exc
        self.stats = CacheStats()

    def get(self, key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(response, fingerprint of the endpoint that produced it), or None."""
        row = self._db.execute("SELECT response, fingerprint FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return json.loads(row[0]), json.loads(row[1])

    def put(
        self, key: str, base_url: str, model: str, response: dict[str, Any], fingerprint: dict[str, Any]
    ) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)",
            (
                key,
                base_url,
                model,
                json.dumps(response),
                json.dumps(fingerprint, sort_keys=True),
                time.time(),
            ),
        )
        self.stats.writes += 1

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

    def clear(self) -> int:
        n = self._db.execute("DELETE FROM responses").rowcount
        self._db.execute("VACUUM")
        return n

    def close(self) -> None:
        self._db.close()


class CacheError(AuditError):
    pass
