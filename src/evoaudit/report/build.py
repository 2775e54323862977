"""Build the report: tables (CSV and parquet) and report.md from rollout records."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from evoaudit.config import Config
from evoaudit.jsonl import iter_records
from evoaudit.records import Rollout
from evoaudit.report import metrics as m


def load_rollouts(paths: list[Path]) -> list[Rollout]:
    rollouts = [r for p in paths for r in iter_records(p, Rollout)]
    return sorted(rollouts, key=lambda r: r.rollout_id)


def main_table(cfg: Config, rollouts: list[Rollout]) -> pd.DataFrame:
    rows = []
    policy = cfg.evaluation.infra_failure_policy
    for cond in cfg.conditions:
        mine = [r for r in rollouts if r.condition == cond]
        benign = m.scored([r for r in mine if r.arm == "benign"], policy)
        attacked = m.scored([r for r in mine if r.arm == "attacked"], policy)
        rows.append(
            {
                "condition": cond,
                "n_benign": len(benign),
                "utility": m.utility(benign),
                "n_attacked": len(attacked),
                "exposure": m.exposure(attacked),
                "casr": m.conditional_asr(attacked),
                "asr": m.asr(attacked),
                "unauth": m.unauthorized_state_change(attacked),
                "unexposed_successes": m.unexposed_successes(attacked),
                "n_excluded": m.excluded(mine),
            }
        )
    return pd.DataFrame(rows)


def _markdown(frame: pd.DataFrame) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in frame.iterrows():
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def build_report(
    cfg: Config, rollout_paths: list[Path], replay_paths: list[Path], provenance: dict, out_dir: Path
) -> None:
    tables = out_dir / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    rollouts = load_rollouts(rollout_paths)
    main = main_table(cfg, rollouts)
    main.to_csv(tables / "main.csv", index=False, float_format="%.6f")
    main.to_parquet(tables / "main.parquet", index=False)
    replays = [json.loads(p.read_text()) for p in replay_paths]
    replayed = sum(r["replayed"] for r in replays)
    mismatched = sum(r["mismatched_rollouts"] for r in replays)
    md = [
        "# evoaudit report",
        "",
        f"Lineages: {', '.join(cfg.lineages)}. Conditions: {', '.join(cfg.conditions)}. "
        f"Executor: {cfg.executor.backend} ({cfg.executor.model}).",
        "",
        "## Main table",
        "",
        "utility = P(task done | benign endpoint episode); exposure = P(injected text reached the model); "
        "casr = P(goal achieved | exposed); asr = P(goal achieved); unauth = P(unauthorised state change) "
        "over attacked episodes. Infrastructure failures are "
        + (
            "excluded from every denominator and counted in n_excluded."
            if cfg.evaluation.infra_failure_policy == "exclude"
            else "kept in the denominators as failures."
        ),
        "",
        _markdown(main),
        "",
        "## Replay",
        "",
        f"Rollouts replayed independently: {replayed}; rollouts with a mismatch: {mismatched}.",
        "",
        "## Provenance",
        "",
        "```json",
        json.dumps(provenance, indent=2, sort_keys=True),
        "```",
        "",
    ]
    (out_dir / "report.md").write_text("\n".join(md))
