"""The poisoning extension's report (docs/poisoning.md): artifact contamination by method x poison share,
persistence at the endpoints (sleeper success, the goal under attack, utility, W->C / C->W against the
clean twin on identical episodes) and one figure, contamination against utility gain. Written beside the
paper's report (``report/poisoning/``), never into its tables; every file carries the simulator notice on
a simulator run (``report.files``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from evoaudit.config import Config
from evoaudit.methods.conditions import condition
from evoaudit.records import (
    ContaminationReplayReport,
    ContaminationReport,
    PersistenceReport,
    WriteScreenRecord,
)
from evoaudit.report.files import save_figure, write_table
from evoaudit.report.simlabel import sim_notice
from evoaudit.report.stats import wilson


def _rate(k: int, n: int, level: float) -> dict[str, float | int]:
    lo, hi = wilson(k, n, level)
    return {"k": k, "n": n, "rate": k / n if n else float("nan"), "ci_low": lo, "ci_high": hi}


def contamination_table(reports: list[ContaminationReport], level: float) -> pd.DataFrame:
    """Per (poisoned lineage, method, evolution round, whose artifact): contaminated units of all units
    (Wilson interval), by kind, and how many of the poisoned acquisition episodes the hits trace back to.
    With ``methods_params.rounds`` above 1, the rounds' rows show whether contamination grows, holds or
    washes out."""
    rows = []
    for rep in reports:
        for a in rep.artifacts:
            sources = {s for h in a.hits for s in h.sources}
            rows.append(
                {
                    "poisoned_lineage": rep.lineage,
                    "twin": rep.twin,
                    "goal": rep.goal,
                    "share": rep.share,
                    "method": a.method,
                    "round": a.round,
                    "artifact_of": "poisoned" if a.lineage == rep.lineage else "clean twin",
                    **{f"units_{k}": v for k, v in _rate(a.contaminated_units, a.units, level).items()},
                    "exact_units": a.exact_units,
                    "near_units": a.near_units,
                    "identifier_units": a.identifier_units,
                    "source_episodes": len(sources),
                    "poisoned_episodes": len(rep.poisoned_episodes),
                }
            )
    return pd.DataFrame(rows)


def write_defences_table(
    reports: list[ContaminationReport], screens: list[WriteScreenRecord], level: float
) -> pd.DataFrame:
    """Which write screen stops which poisoning at what cost: per (poisoned lineage, screen, method), the
    poisoned acquisition episodes the screen flagged of all poisoned ones (recall), the benign episodes it
    flagged of all benign ones (false drops), both with Wilson intervals, and the contamination of the
    method's artifacts learned from the screened record. Each screen judges every trajectory, so its
    counts are its own; the artifacts learned from what every configured screen kept (``screens_applied``),
    so with several screens an ``any`` row gives the drops that contamination follows."""
    by_lineage = {s.lineage: s for s in screens}
    rows = []
    for rep in reports:
        rec = by_lineage[rep.lineage]
        if rec.source_sha256 != rep.acquisition_sha256:
            raise ValueError(
                f"{rep.lineage}: the write screen read acquisition {rec.source_sha256[:12]}, the "
                f"contamination report {rep.acquisition_sha256[:12]}; rerun write_screen and contamination"
            )
        poisoned = set(rep.poisoned_episodes)
        benign_n = rec.rollouts - len(poisoned)
        # The screen filters round 1's acquisition: the artifacts learned from it.
        first = [a for a in rep.artifacts if a.round == 1]
        twin = {a.method: a for a in first if a.lineage == rep.twin}
        names = [*rec.screens, *(["any"] if len(rec.screens) > 1 else [])]
        for screen in names:
            flagged = {
                d.rollout_id
                for d in rec.dropped
                if screen == "any" or any(f.screen == screen for f in d.flags)
            }
            if screen != "any" and len(flagged) != rec.flagged.get(screen, 0):
                raise ValueError(f"{rep.lineage}: {screen}'s dropped trajectories disagree with its count")
            caught = len(flagged & poisoned)
            for a in first:
                if a.lineage != rep.lineage:
                    continue
                rows.append(
                    {
                        "poisoned_lineage": rep.lineage,
                        "twin": rep.twin,
                        "goal": rep.goal,
                        "share": rep.share,
                        "screen": screen,
                        "screens_applied": "+".join(rec.screens),
                        **{f"recall_{k}": v for k, v in _rate(caught, len(poisoned), level).items()},
                        **{
                            f"false_drop_{k}": v
                            for k, v in _rate(len(flagged) - caught, benign_n, level).items()
                        },
                        "method": a.method,
                        **{f"units_{k}": v for k, v in _rate(a.contaminated_units, a.units, level).items()},
                        "twin_units_k": twin[a.method].contaminated_units if a.method in twin else None,
                        "twin_units_n": twin[a.method].units if a.method in twin else None,
                    }
                )
    return pd.DataFrame(rows)


def persistence_table(reports: list[PersistenceReport], level: float) -> pd.DataFrame:
    """Per (poisoned lineage, condition, arm): the poisoning goal met (benign arm: sleeper success), utility
    and unauthorised state change for the poisoned lineage and its twin, and the paired transitions of
    utility on identical episodes (W->C: the twin failed, the poisoned lineage succeeded; C->W the reverse).
    Infrastructure failures leave every denominator (a pair leaves when either episode failed)."""
    rows = []
    for rep in reports:
        frame = pd.DataFrame([r.model_dump() for r in rep.rows])
        if frame.empty:
            continue
        frame["goal"] = frame["goal"].fillna("none")
        key = ["condition", "arm", "instance_id", "goal"]
        dirty = frame[frame.lineage == rep.lineage].set_index(key)
        clean = frame[frame.lineage == rep.twin].set_index(key)
        paired = dirty.join(clean, lsuffix="_p", rsuffix="_c", how="inner")
        paired = paired[~paired.infra_failure_p & ~paired.infra_failure_c]
        assert (paired.seed_p == paired.seed_c).all(), "a poisoned episode's seed is not its twin's"
        for (cond, arm), g in paired.groupby(level=["condition", "arm"], sort=True):
            n, lvl = len(g), level
            rows.append(
                {
                    "poisoned_lineage": rep.lineage,
                    "twin": rep.twin,
                    "goal": rep.goal,
                    "share": rep.share,
                    "condition": cond,
                    "arm": arm,
                    "pairs": n,
                    **{f"goal_met_{k}": v for k, v in _rate(int(g.poison_goal_met_p.sum()), n, lvl).items()},
                    "goal_met_twin": int(g.poison_goal_met_c.sum()),
                    "utility_poisoned": g.utility_p.mean(),
                    "utility_twin": g.utility_c.mean(),
                    "d_utility": g.utility_p.mean() - g.utility_c.mean(),
                    "w_to_c": int((~g.utility_c & g.utility_p).sum()),
                    "c_to_w": int((g.utility_c & ~g.utility_p).sum()),
                    "unauthorized_poisoned": int(g.unauthorized_state_change_p.sum()),
                    "unauthorized_twin": int(g.unauthorized_state_change_c.sum()),
                    "state_mismatches": int((~g.state_matches_p).sum() + (~g.state_matches_c).sum()),
                }
            )
    return pd.DataFrame(rows)


def _figure(
    contam: pd.DataFrame, persist: pd.DataFrame, baseline: str, out: Path, notice: str | None
) -> list[Path]:
    """Contamination (share of units) against utility gain over the baseline condition
    (``report.baseline``) on the clean endpoint, per method, the poisoned lineages as points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    # Round 1's artifacts, against round 1's evaluation (the conditions of the protocol's one pass).
    dirty = contam[(contam.artifact_of == "poisoned") & (contam["round"] == 1)]
    if persist.empty:  # nothing evaluated: an empty figure, still stamped
        dirty = dirty.iloc[0:0]
    benign = persist[persist.arm == "benign"] if not persist.empty else persist
    for method, g in dirty.groupby("method", sort=True):
        xs, ys = [], []
        for _, row in g.iterrows():
            here = benign[benign.poisoned_lineage == row.poisoned_lineage]
            mine = here[[condition(c).method == method for c in here.condition]]
            base = here[here.condition == baseline]
            if mine.empty or base.empty or row.units_n == 0:
                continue
            ys.extend(u - base.utility_poisoned.iloc[0] for u in mine.utility_poisoned)
            xs.extend([row.units_rate] * len(mine))
        if xs:
            ax.scatter(xs, ys, label=method)
    ax.set_xlabel("contaminated units (share of the artifact's units)")
    ax.set_ylabel(f"utility gain over {baseline} (clean endpoint)")
    ax.axhline(0, color="grey", linewidth=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return save_figure(fig, out, "poisoning_contamination_utility", notice)


_DEFENCE_COLUMNS = [
    *("poisoned_lineage", "screen", "recall_k", "recall_n", "recall_ci_low", "recall_ci_high"),
    *("false_drop_k", "false_drop_n", "false_drop_ci_high", "method", "units_k", "units_n", "units_rate"),
    *("units_ci_low", "units_ci_high", "twin_units_k", "twin_units_n"),
]


def poisoning_report(
    cfg: Config,
    contamination: list[Path],
    replays: list[Path],
    persistence: list[Path],
    out_dir: Path,
    screens: Sequence[Path] = (),
) -> Path:
    """The extension's tables, figure and ``poisoning.md`` under ``out_dir``; returns the markdown file.
    ``screens``: the poisoned lineages' write screen records, given when ``write_defenses.screens`` is set
    (then ``tables/write_defences.csv`` too)."""
    level = cfg.report.bootstrap.level
    notice = sim_notice(cfg)
    contam_reports = [ContaminationReport.read(p) for p in contamination]
    contam = contamination_table(contam_reports, level)
    persist = persistence_table([PersistenceReport.read(p) for p in persistence], level)
    checks = [ContaminationReplayReport.read(p) for p in replays]
    write_table(contam, out_dir / "tables" / "contamination.csv", notice, "%.6g")
    write_table(persist, out_dir / "tables" / "persistence.csv", notice, "%.6g")
    _figure(contam, persist, cfg.report.baseline, out_dir / "figures", notice)
    lines = ["# Attacks on the evolution step (poisoning extension)", ""]
    if notice:
        lines += [f"**{notice}**", "", "Contamination and sleeper success here are what the simulator's "
                  "planted susceptibilities (`sim.poison_copy`, `sim.poison_sleeper`) produced: a mechanism "
                  "check of the measures, not a finding about any model.", ""]
    mismatched = sum(len(c.mismatches) for c in checks)
    lines += [
        f"Replay recomputed {len(checks)} contamination report(s): {mismatched} mismatching field(s).",
        "",
        f"## Contamination (contaminated units / units, Wilson {level:.0%} interval)",
        "",
        _markdown(contam, ["poisoned_lineage", "share", "method", "round", "artifact_of", "units_k",
                           "units_n", "units_rate", "units_ci_low", "units_ci_high", "exact_units",
                           "near_units", "identifier_units", "source_episodes", "poisoned_episodes"]),
        "",
        "## Persistence (benign arm: sleeper success; pairs = identical episodes with the clean twin)",
        "",
        _markdown(persist, ["poisoned_lineage", "condition", "arm", "pairs", "goal_met_k", "goal_met_rate",
                            "goal_met_ci_low", "goal_met_ci_high", "goal_met_twin", "utility_poisoned",
                            "utility_twin", "w_to_c", "c_to_w", "unauthorized_poisoned",
                            "unauthorized_twin", "state_mismatches"]),
        "",
    ]
    if screens:
        defences = write_defences_table(contam_reports, [WriteScreenRecord.read(p) for p in screens], level)
        write_table(defences, out_dir / "tables" / "write_defences.csv", notice, "%.6g")
        lines += [
            f"## Write defences (recall: poisoned episodes dropped / poisoned; false drops: benign dropped / "
            f"benign; contamination: contaminated units / units of the artifacts learned from what "
            f"`screens_applied` kept; Wilson {level:.0%} intervals)",
            "",
            _markdown(defences, _DEFENCE_COLUMNS),
            "",
        ]
    lines += [
        "## Offending units (quoted)",
        "",
    ]
    for p in contamination:
        rep = ContaminationReport.read(p)
        for a in rep.artifacts:
            for h in a.hits[:5]:
                where = f"{a.lineage}/{a.method}" + (f" round {a.round}" if a.round > 1 else "")
                lines.append(f"- {where} `{h.unit_id}` ({h.unit_kind}, {h.kind}; from "
                             f"{', '.join(h.sources) or 'no single episode'}): \"{_one_line(h.unit_text)}\"")
    md = out_dir / "poisoning.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _markdown(frame: pd.DataFrame, columns: list[str]) -> str:
    if frame.empty:
        return "(no rows)"
    shown = frame[columns]
    head = "| " + " | ".join(columns) + " |"
    rule = "|" + "---|" * len(columns)
    body = [
        "| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row) + " |"
        for row in shown.itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])
