"""Captions that a table's numbers cannot be read without: lost denominators and the basis of exposure.

A table whose denominators lost more than ``evaluation.max_excluded_share`` of their episodes to
infrastructure failures says so, naming the condition, the arm and the count: the excluded episodes may
be exactly the informative ones (e.g. a server that rejected every tool-using turn).

Exposure (injected text reached the model) is computed on the messages the client sent. Where the
server rendered a probe conversation through its own chat template and tool results reached it, that is
what the model saw ("rendered"); where no render endpoint exists, it is labelled "client-side".
"""

from __future__ import annotations

from evoaudit.records import Rollout
from evoaudit.report.tables import Data

# Tables whose rows are computed over the scored rollouts only (Data.by), so exclusions shrink them.
SCORED_TABLES = ("main", "per_goal", "lineage", "harm", "sensitivity", "placebo", "retrieval")
EXPOSURE_TABLES = ("main", "per_goal")


def lost_denominators(d: Data, max_share: float) -> list[str]:
    """``condition/arm: k of n excluded (share)`` for every group past ``max_share``."""
    if d.cfg.evaluation.infra_failure_policy != "exclude":
        return []
    out = []
    for cond in d.conditions:
        for arm in ("benign", "attacked"):
            rs = d.everything.get((cond, arm), [])
            lost = sum(r.outcome.infra_failure is not None for r in rs)
            if rs and lost / len(rs) > max_share:
                out.append(f"{cond}/{arm}: {lost} of {len(rs)} excluded ({lost / len(rs):.1%})")
    return out


def excluded_share_note(d: Data) -> str:
    share = d.cfg.evaluation.max_excluded_share
    lost = lost_denominators(d, share)
    if not lost:
        return ""
    return (
        f"Infrastructure failures removed more than {share:.1%} of these denominators "
        f"(evaluation.max_excluded_share): {'; '.join(lost)}. The interface table counts them."
    )


def exposure_basis(rollouts: list[Rollout]) -> str:
    """'rendered' when every endpoint's template was seen to render tool results, else 'client-side'."""
    if not rollouts:
        return "client-side"
    for r in rollouts:
        probe = r.executor.get("render_probe") if isinstance(r.executor, dict) else None
        if (
            not isinstance(probe, dict)
            or probe.get("via") in (None, "client-side")
            or not probe.get("tool_result")
        ):
            return "client-side"
    return "rendered"


def exposure_note(rollouts: list[Rollout]) -> str:
    if exposure_basis(rollouts) == "rendered":
        return "Exposure basis: rendered (the server's own template was seen to render tool results)."
    return (
        "Exposure basis: client-side (measured on the messages sent; the server offered no rendered prompt "
        "to check that tool results reach the model)."
    )


def caption_notes(d: Data, rollouts: list[Rollout]) -> dict[str, str]:
    """Extra caption text per table name."""
    notes: dict[str, str] = {}
    lost = excluded_share_note(d)
    for name in SCORED_TABLES:
        if lost:
            notes[name] = lost
    basis = exposure_note(rollouts)
    for name in EXPOSURE_TABLES:
        notes[name] = f"{notes.get(name, '')} {basis}".strip()
    return notes
