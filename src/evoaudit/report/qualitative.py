"""Pre-specified qualitative cases, chosen by the rule in config (``qualitative``), never by hand.

Three cases, each against the baseline condition on matched episodes:

- ``new_high_severity``: an attacked episode with a high-severity harm whose baseline twin had none;
- ``c_to_w``: a benign episode the baseline got right and the condition got wrong;
- ``w_to_c``: the reverse.

"Largest" counts such episodes per (condition, unit) with unit = family, goal or instance; the largest
group wins (ties: configured condition order, then unit name), and the case shown is its first episode
by rollout id, beside its baseline twin.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pandas as pd

from evoaudit.config import QualitativeConfig
from evoaudit.records import Rollout
from evoaudit.report import metrics as m

CASES = ("new_high_severity", "c_to_w", "w_to_c")


@dataclass(frozen=True)
class Case:
    case: str
    condition: str
    unit: str
    unit_value: str
    group_size: int
    rollout: Rollout
    baseline: Rollout


def _unit(r: Rollout, unit: str) -> str:
    if unit == "goal":
        return r.goal or r.family  # benign episodes have no goal: fall back to the family
    if unit == "instance":
        return r.instance_id
    return r.family


def _high(r: Rollout, categories: tuple[str, ...]) -> bool:
    return any(r.outcome.harm.get(c, False) for c in categories)


def select(
    qcfg: QualitativeConfig,
    conditions: list[str],
    baseline: str,
    by: dict[tuple[str, str], list[Rollout]],
) -> list[Case]:
    tests = {
        "new_high_severity": (
            "attacked",
            lambda c, b: _high(c, qcfg.high_severity) and not _high(b, qcfg.high_severity),
        ),
        "c_to_w": ("benign", lambda c, b: b.outcome.utility and not c.outcome.utility),
        "w_to_c": ("benign", lambda c, b: c.outcome.utility and not b.outcome.utility),
    }
    out = []
    for case, (arm, hit) in tests.items():
        base = m.index_pairs(by.get((baseline, arm), []), f"qualitative ({baseline})")
        best: tuple | None = None
        for order, cond in enumerate(conditions):
            if cond == baseline:
                continue
            groups: dict[str, list[tuple[Rollout, Rollout]]] = defaultdict(list)
            for r in by.get((cond, arm), []):
                twin = base.get(m.pair_key(r))
                if twin is not None and hit(r, twin):
                    groups[_unit(r, qcfg.unit)].append((r, twin))
            for value, pairs in groups.items():
                rank = (-len(pairs), order, value)
                if best is None or rank < best[0]:
                    first = min(pairs, key=lambda p: p[0].rollout_id)
                    best = (rank, cond, value, len(pairs), first)
        if best is not None:
            _, cond, value, size, (r, twin) = best
            out.append(Case(case, cond, qcfg.unit, value, size, r, twin))
    return out


def cases_table(cases: list[Case]) -> pd.DataFrame:
    cols = ["case", "condition", "unit", "unit_value", "group_size", "rollout_id", "baseline_rollout_id"]
    rows = [
        [c.case, c.condition, c.unit, c.unit_value, c.group_size, c.rollout.rollout_id, c.baseline.rollout_id]
        for c in cases
    ]
    return pd.DataFrame(rows, columns=cols)
