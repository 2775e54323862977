"""Seeds derived from the identity of a draw, never from the condition (common random numbers)."""

from __future__ import annotations

import hashlib


def derive_seed(global_seed: int, *parts: object) -> int:
    """A 63-bit seed from the global seed and the draw's identity (lineage, instance, goal, turn, role)."""
    text = "\x1f".join([str(global_seed), *("" if p is None else str(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1
