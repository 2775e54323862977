"""Cross-executor transfer check: frozen artifacts evaluated on a second executor, without re-evolution.

The evaluation itself is the ordinary ``evaluate`` stage run under a derived configuration (second
executor, goal and variant subset; ``evoaudit.transfer_config`` derives it); this module builds the
side-by-side table from both executors' rollouts on the same subset.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from evoaudit.config import Config
from evoaudit.records import Rollout
from evoaudit.report import metrics as m
from evoaudit.report.stats import FamilyBootstrap
from evoaudit.transfer_config import active_conditions, transfer_lineages


def in_subset(cfg: Config, r: Rollout) -> bool:
    t = cfg.transfer
    return (
        r.arm == "attacked"
        and r.goal in t.goals
        and r.variant in t.variants
        and r.lineage in transfer_lineages(cfg)
        and r.condition in t.conditions
    )


COLUMNS = [
    "executor",
    "condition",
    "n_attacked",
    "exposure",
    "exposure_lo",
    "exposure_hi",
    "asr",
    "asr_lo",
    "asr_hi",
    "casr",
    "d_exposure",
    "d_exposure_lo",
    "d_exposure_hi",
    "d_asr",
    "d_asr_lo",
    "d_asr_hi",
    "mean_tool_calls",
    "read_call_rate",
    "flags",
]


def transfer_table(
    cfg: Config, primary: list[Rollout], second: list[Rollout], boot_seed: int
) -> pd.DataFrame:
    """Exposure, ASR, tool calls and read-call rate per executor × condition on the transfer subset."""
    policy = cfg.evaluation.infra_failure_policy
    base = cfg.report.baseline
    ceiling = cfg.transfer.ceiling
    rows = []
    for label, rollouts in (
        (f"primary:{cfg.executor.model}", primary),
        (f"second:{cfg.transfer.executor.model}", second),
    ):
        sub = m.scored([r for r in rollouts if in_subset(cfg, r)], policy)
        boot = FamilyBootstrap(
            sorted({r.family for r in sub}),
            cfg.report.bootstrap.replicates,
            boot_seed,
            cfg.report.bootstrap.level,
        )
        by_cond = {c: [r for r in sub if r.condition == c] for c in active_conditions(cfg)}
        flags = []
        base_rs = by_cond.get(base, [])
        if base_rs:
            for name, metric in (("exposure", m.exposure), ("asr", m.asr)):
                v = metric(base_rs).value
                if v >= ceiling:
                    flags.append(
                        f"{name} {v:.2f} >= {ceiling} under {base}: ceiling, a condition cannot raise it"
                    )
                elif v <= 1 - ceiling:
                    flags.append(f"{name} {v:.2f} <= {1 - ceiling:.2f} under {base}: floor")
        for cond, rs in by_cond.items():
            if not rs:
                continue
            row: dict[str, Any] = {"executor": label, "condition": cond, "n_attacked": len(rs)}
            for name, metric in (("exposure", m.exposure), ("asr", m.asr)):
                row[name] = metric(rs).value
                row[f"{name}_lo"], row[f"{name}_hi"] = boot.interval(rs, metric)
            row["casr"] = m.conditional_asr(rs).value
            row["mean_tool_calls"] = m.mean_tool_calls(rs).value
            row["read_call_rate"] = m.read_call_rate(rs).value
            if base_rs and cond != base:
                a, b = m.matched(rs, base_rs)
                for name, metric in (("exposure", m.exposure), ("asr", m.asr)):
                    row[f"d_{name}"] = metric(a).value - metric(b).value
                    row[f"d_{name}_lo"], row[f"d_{name}_hi"] = boot.delta_interval(a, b, metric)
            row["flags"] = "; ".join(flags)
            rows.append(row)
    frame = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in frame.columns:
            frame[c] = math.nan if c != "flags" else ""
    return frame[COLUMNS] if len(frame) else pd.DataFrame(columns=COLUMNS)
