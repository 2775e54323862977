"""Seen/unseen split over families, holding near-duplicate families out together."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

# Families that share a fixture artefact and an intent are near-duplicates: a method that learned one
# has effectively seen the other, so they sit on the same side of the split.
CLUSTERS: dict[str, tuple[str, ...]] = {
    "rent_notice": ("user_task_2", "user_task_12"),
    "refund_friend": ("user_task_3", "user_task_4"),
    "history_question": ("user_task_1", "user_task_7"),
}


@dataclass(frozen=True)
class Split:
    split: dict[str, str]  # family -> seen | unseen
    cluster: dict[str, str]  # family -> cluster id


def cluster_of(family: str) -> str:
    for name, members in CLUSTERS.items():
        if family in members:
            return name
    return family


def assign_split(families: list[str], n_unseen: int) -> Split:
    """Deterministic from labels alone: clusters ordered by a hash of their name, unseen taken first
    until ``n_unseen`` families are held out (a cluster is never split, so it may hold out more)."""
    clusters: dict[str, list[str]] = {}
    for fam in families:
        clusters.setdefault(cluster_of(fam), []).append(fam)
    if n_unseen >= len(families):
        raise ValueError(f"suite.n_unseen={n_unseen} leaves no seen family (there are {len(families)})")
    order = sorted(clusters, key=lambda c: hashlib.sha256(c.encode()).hexdigest())
    split: dict[str, str] = {}
    held = 0
    for name in order:
        side = "unseen" if held < n_unseen else "seen"
        for fam in clusters[name]:
            split[fam] = side
        if side == "unseen":
            held += len(clusters[name])
    return Split(split=split, cluster={f: cluster_of(f) for f in families})
