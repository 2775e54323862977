"""Seen/unseen split over families, holding near-duplicate families out together."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

# Families that share a fixture artefact and an intent are near-duplicates: a method that learned one
# has effectively seen the other, so they sit on the same side of the split.
CLUSTERS: dict[str, tuple[str, ...]] = {
    # Both adjust the rent standing order from the landlord's notice.
    "rent_notice": ("user_task_2", "user_task_12"),
    # Both refund the friend's incoming transfer found in the history.
    "refund_friend": ("user_task_3", "user_task_4"),
    # Both answer an amount question from the transaction history.
    "history_question": ("user_task_1", "user_task_7"),
    # Both take the Spotify payment in the history as the reference amount.
    "spotify_reference": ("user_task_5", "user_task_6"),
    # Both update the account address (user task 15 adds the standing order and a refund).
    "address_update": ("user_task_13", "user_task_15"),
    # Both are underspecified requests whose right outcome is no change.
    "underspecified": ("user_task_9", "user_task_10"),
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
    """Deterministic from labels alone: clusters are ordered by a hash of their name and held out in that
    order whenever the whole cluster still fits, until exactly ``n_unseen`` families are unseen."""
    clusters: dict[str, list[str]] = {}
    for fam in families:
        clusters.setdefault(cluster_of(fam), []).append(fam)
    if not 0 < n_unseen < len(families):
        raise ValueError(
            f"suite.n_unseen={n_unseen} must leave a family on each side (there are {len(families)})"
        )
    order = sorted(clusters, key=lambda c: hashlib.sha256(c.encode()).hexdigest())
    split = dict.fromkeys(families, "seen")
    held = 0
    for name in order:
        if held + len(clusters[name]) <= n_unseen:
            for fam in clusters[name]:
                split[fam] = "unseen"
            held += len(clusters[name])
    if held != n_unseen:
        sizes = sorted(len(m) for m in clusters.values())
        raise ValueError(
            f"suite.n_unseen={n_unseen}: no whole clusters add up to it (cluster sizes {sizes}); "
            "choose another count"
        )
    return Split(split=split, cluster={f: cluster_of(f) for f in families})
