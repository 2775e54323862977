"""The sentinel API key and the search for it, shared by the tests that check a key is written nowhere."""

from __future__ import annotations

from pathlib import Path

SENTINEL = "sk-evoaudit-SENTINEL-7f3c9a1e5b2d4680"
KEY_ENV = "EVOAUDIT_SENTINEL_API_KEY"


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``needle``, as UTF-8 or as UTF-16 (binary stores such
    as SQLite may hold either)."""
    forms = [needle.encode(), needle.encode("utf-16-le")]
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(f in data for f in forms):
                hits.append(path)
    return sorted(hits)
