"""Cross-executor transfer check: frozen artifacts evaluated on a second executor, without re-evolution.

The evaluation itself is the ordinary ``evaluate`` stage run under a derived configuration (second
executor, goal and variant subset); this module derives that configuration and builds the side-by-side
table from both executors' rollouts on the same subset.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from evoaudit import config as config_mod
from evoaudit.config import Config, ConfigError
from evoaudit.credentials import public_config
from evoaudit.records import Rollout
from evoaudit.report import metrics as m
from evoaudit.report.stats import FamilyBootstrap

SOURCE = "transfer (derived from the audit configuration)"


def active_conditions(cfg: Config) -> list[str]:
    return [c for c in cfg.transfer.conditions if c in cfg.conditions]


def transfer_lineages(cfg: Config) -> list[str]:
    return list(cfg.transfer.lineages) if cfg.transfer.lineages is not None else list(cfg.lineages)


def derive_config(cfg: Config) -> dict[str, Any]:
    """The configuration of the transfer evaluation: the audit's, with the second executor and the subset."""
    t = cfg.transfer
    bad_variants = sorted(set(t.variants) - set(cfg.roles.attacked_endpoint))
    if bad_variants:
        raise ConfigError(
            f"config: transfer.variants: {bad_variants} are not attacked endpoint variants "
            f"(roles.attacked_endpoint = {list(cfg.roles.attacked_endpoint)}); pick from those"
        )
    bad_lineages = sorted(set(transfer_lineages(cfg)) - set(cfg.lineages))
    if bad_lineages:
        raise ConfigError(
            f"config: transfer.lineages: {bad_lineages} are not in lineages {list(cfg.lineages)}"
        )
    unknown = sorted(set(t.sim) - set(cfg.sim.model_dump()))
    if unknown:
        raise ConfigError(
            f"config: transfer.sim: unknown simulator parameters {unknown}; "
            f"allowed: {sorted(cfg.sim.model_dump())}"
        )
    data = cfg.model_dump(mode="json")
    data["executor"] = t.executor.model_dump(mode="json")
    data["sim"] = {**data["sim"], **t.sim}
    data["suite"]["goals"] = list(t.goals)
    data["roles"]["attacked_endpoint"] = list(t.variants)
    data["lineages"] = transfer_lineages(cfg)
    data["conditions"] = active_conditions(cfg) or [cfg.conditions[0]]
    data["evaluation"]["shards"] = 1
    data["transfer"]["enabled"] = False  # the derived run does not nest another transfer
    config_mod.from_dict(data, SOURCE)  # every derived value must still pass the schema
    return data


def evaluation_config(cfg: Config, recorded: Path) -> Config:
    """The configuration a transfer job runs under: derived again from the audit's own configuration,
    because the recorded copy (``recorded``, written by the transfer_config rule) has URL credentials
    redacted. The two must agree apart from those, so the record says what ran."""
    derived = derive_config(cfg)
    try:
        on_file = json.loads(recorded.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{recorded}: unreadable transfer configuration ({exc}); rerun snakemake") from exc
    public = public_config(derived)
    if on_file != public:
        differ = sorted(k for k in set(on_file) | set(public) if on_file.get(k) != public.get(k))
        raise ConfigError(
            f"{recorded}: differs from the transfer configuration derived from the audit's configuration "
            f"in {differ}; it is a record, not an input: delete it and rerun snakemake to write it again"
        )
    return config_mod.from_dict(derived, SOURCE)


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
