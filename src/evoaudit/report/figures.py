"""Figures (PNG and SVG) drawn from the report's tables only, so a figure never disagrees with a table."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: no display on cluster nodes

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.transforms as transforms  # noqa: E402
import pandas as pd  # noqa: E402

from evoaudit.report.files import save_figure  # noqa: E402
from evoaudit.report.names import FIGURES  # noqa: E402, F401 - re-exported for callers

# Fixed SVG ids and no timestamps: the same tables give the same files.
_RC = {"svg.hashsalt": "evoaudit", "font.size": 9, "figure.dpi": 100}


def _err(frame: pd.DataFrame, col: str) -> list[list[float]]:
    lo = (frame[col] - frame[f"{col}_lo"]).clip(lower=0).fillna(0)
    hi = (frame[f"{col}_hi"] - frame[col]).clip(lower=0).fillna(0)
    return [lo.tolist(), hi.tolist()]


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def coincident_groups(points: list[tuple[float, float]], tol: float = 1e-9) -> list[list[int]]:
    """Indices of points drawn at the same place (within ``tol``), in input order; singletons included."""
    groups: list[list[int]] = []
    for i, (x, y) in enumerate(points):
        for g in groups:
            gx, gy = points[g[0]]
            if abs(gx - x) <= tol and abs(gy - y) <= tol:
                g.append(i)
                break
        else:
            groups.append([i])
    return groups


def _side_by_side(points: list[tuple[float, float]]) -> dict[int, float]:
    """Screen offsets (in points) that draw coincident points (e.g. two placebos at (0, 0)) side by side,
    a few points apart; their data stay exact, and ``_name_coincident`` names them together."""
    shift: dict[int, float] = {}
    for group in coincident_groups(points):
        for j, i in enumerate(group):
            shift[i] = (j - (len(group) - 1) / 2) * 9.0
    return shift


def _name_coincident(
    ax, points: list[tuple[float, float]], names: list[str], fmt: str, mark: bool = True
) -> None:
    """List each group of coincident points under the axes, where no point hides it, and (``mark``) say
    "N at one point" beside it (left out where groups lie close enough for the marks to collide)."""
    notes = []
    for group in coincident_groups(points):
        if len(group) > 1:
            x, y = points[group[0]]
            if mark:
                ax.annotate(
                    f"{len(group)} at one point",
                    (x, y),
                    xytext=(0, 10),
                    textcoords="offset points",
                    ha="center",
                    fontsize=6,
                    color="0.25",
                )
            notes.append(f"({fmt.format(x)}, {fmt.format(y)}): " + ", ".join(names[i] for i in group))
    if notes:
        ax.annotate(
            "Same point, drawn side by side: " + "; ".join(notes),
            (0, -0.13),
            xycoords="axes fraction",
            va="top",
            fontsize=7,
            color="0.25",
            wrap=True,
        )


def delta_utility_asr(
    main: pd.DataFrame,
    lineage: pd.DataFrame,
    lineages: list[str],
    out: Path,
    baseline: str,
    notice: str | None = None,
):
    fig, ax = plt.subplots(figsize=(6.5, 5))
    rows = main[main["condition"] != baseline].dropna(subset=["d_utility", "d_asr"])
    if rows.empty:
        _empty(ax, f"no condition with a delta against {baseline} in this run")
    colors = plt.get_cmap("tab10")
    points = [(float(r["d_utility"]), float(r["d_asr"])) for _, r in rows.iterrows()]
    shift = _side_by_side(points)
    for i, (_, r) in enumerate(rows.iterrows()):
        c = colors(i % 10)
        lu = lineage[(lineage["condition"] == r["condition"]) & (lineage["metric"] == "utility")]
        la = lineage[(lineage["condition"] == r["condition"]) & (lineage["metric"] == "asr")]
        if not lu.empty and not la.empty:
            xs = [lu.iloc[0][f"d_{lin}"] for lin in lineages]
            ys = [la.iloc[0][f"d_{lin}"] for lin in lineages]
            ax.scatter(xs, ys, color=c, s=14, alpha=0.5, marker="o")
        moved = transforms.offset_copy(ax.transData, fig=fig, x=shift[i], y=0, units="points")
        ax.errorbar(
            [r["d_utility"]],
            [r["d_asr"]],
            xerr=_err(rows.loc[[r.name]], "d_utility"),
            yerr=_err(rows.loc[[r.name]], "d_asr"),
            color=c,
            marker="D",
            markersize=7,
            capsize=3,
            label=r["condition"],
            transform=moved,
        )
    _name_coincident(ax, points, rows["condition"].tolist(), "{:+.3f}")
    # The side-by-side markers use an offset transform, which autoscaling ignores: set the limits from
    # the intervals and lineage points themselves.
    if not rows.empty:
        lx = lineage[lineage["metric"] == "utility"].filter(like="d_").to_numpy().ravel().tolist()
        ly = lineage[lineage["metric"] == "asr"].filter(like="d_").to_numpy().ravel().tolist()
        xs = [*rows["d_utility_lo"], *rows["d_utility_hi"], *rows["d_utility"], *lx, 0.0]
        ys = [*rows["d_asr_lo"], *rows["d_asr_hi"], *rows["d_asr"], *ly, 0.0]
        xs = [v for v in xs if v == v]
        ys = [v for v in ys if v == v]
        padx = max((max(xs) - min(xs)) * 0.08, 0.02)
        pady = max((max(ys) - min(ys)) * 0.12, 0.02)
        ax.set_xlim(min(xs) - padx, max(xs) + padx)
        ax.set_ylim(min(ys) - pady, max(ys) + pady)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.axvline(0, color="0.6", lw=0.8)
    ax.set_xlabel(f"Δ benign utility vs {baseline}")
    ax.set_ylabel(f"Δ ASR vs {baseline}")
    ax.set_title("Capability vs security change (diamond: pooled, 95% CI; dots: lineages)")
    if not rows.empty:
        ax.legend(fontsize=7, loc="best")
    return save_figure(fig, out, "delta_utility_asr", notice)


def exposure_casr(main: pd.DataFrame, out: Path, notice: str | None = None):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    xs = [i / 100 for i in range(1, 101)]
    for level in (0.1, 0.2, 0.3, 0.5):
        ax.plot(xs, [min(level / x, 1.05) for x in xs], color="0.85", lw=0.8)
        ax.text(1.0, level, f"ASR={level}", fontsize=6, color="0.5", ha="right", va="bottom")
    rows = main.dropna(subset=["exposure"])
    colors = plt.get_cmap("tab10")
    points = [
        (float(r["exposure"]), 0.0 if math.isnan(r["casr"]) else float(r["casr"])) for _, r in rows.iterrows()
    ]
    shift = _side_by_side(points)  # conditions with equal rates (e.g. static and its placebos) stay visible
    for i, (_, r) in enumerate(rows.iterrows()):
        moved = transforms.offset_copy(ax.transData, fig=fig, x=shift[i], y=0, units="points")
        ax.errorbar(
            [points[i][0]],
            [points[i][1]],
            xerr=_err(rows.loc[[r.name]], "exposure"),
            yerr=_err(rows.loc[[r.name]], "casr"),
            color=colors(i % 10),
            marker="o",
            capsize=3,
            label=r["condition"],
            transform=moved,
        )
    _name_coincident(ax, points, rows["condition"].tolist(), "{:.3f}", mark=False)
    if rows.empty:
        _empty(ax, "no attacked episodes in this run")
    else:
        ax.legend(fontsize=7, loc="best")
    ax.set_xlim(0, 1.05)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("exposure = P(injected text reached the model)")
    ax.set_ylabel("conditional ASR = P(goal achieved | exposed)")
    ax.set_title("ASR = exposure × conditional ASR (grey: iso-ASR curves)")
    return save_figure(fig, out, "exposure_casr", notice)


def harm(harm_table: pd.DataFrame, out: Path, notice: str | None = None):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    conds = harm_table["condition"].tolist()
    if not conds:
        _empty(ax1, "no attacked episodes in this run")
        _empty(ax2, "")
        return save_figure(fig, out, "harm", notice)
    ax1.bar(conds, harm_table["asr_state"], label="ASR hit with state change", color="tab:red")
    ax1.bar(
        conds,
        harm_table["extra_state"],
        bottom=harm_table["asr_state"],
        label="state change without goal success",
        color="tab:orange",
    )
    top = float((harm_table["asr_state"].fillna(0) + harm_table["extra_state"].fillna(0)).max())
    ax1.set_ylim(0, max(top * 1.35, 0.05))  # room for the legend above the bars
    ax1.set_ylabel("share of attacked episodes")
    ax1.set_title("Unauthorised state change, partitioned")
    ax1.legend(fontsize=7)
    ax1.set_xticks(range(len(conds)), conds, rotation=90, fontsize=7)  # upright names cannot collide
    cats = [c[: -len("_lo")] for c in harm_table.columns if c.endswith("_lo")]
    cats = [c for c in cats if c not in ("unauth", "asr_state", "extra_state", "disclosure")]
    width = 0.8 / max(len(cats), 1)
    for j, cat in enumerate(cats):
        pos = [i + (j - len(cats) / 2 + 0.5) * width for i in range(len(conds))]
        ax2.bar(pos, harm_table[cat], width=width, label=cat.replace("_", " "))
    ax2.set_xticks(range(len(conds)), conds, rotation=90, fontsize=7)
    ax2.set_title("Harm categories")
    ax2.legend(fontsize=6)
    return save_figure(fig, out, "harm", notice)


def interface(iface: pd.DataFrame, out: Path, notice: str | None = None):
    # A 2 × 2 grid, one tick per condition (arms as paired bars), so that condition names stay legible.
    fig, grid = plt.subplots(2, 2, figsize=(12, 8.5))
    panels = (
        ("textual_action_rate", "textual-action rate", None),
        ("zero_call_rate", "zero-real-tool-call rate", None),
        ("mean_tool_calls", "mean real tool calls", None),
        ("read_call_rate", "attacked episodes with a read call", "attacked"),
    )
    arm_colors = {"benign": "tab:blue", "attacked": "tab:orange"}
    for ax, (col, title, only) in zip(grid.flat, panels, strict=True):
        sub = iface if only is None else iface[iface["arm"] == only]
        ax.set_title(title)
        if sub.empty:
            _empty(ax, "not available")
            continue
        conds = list(dict.fromkeys(sub["condition"]))
        arms = [a for a in arm_colors if a in set(sub["arm"])]
        width = 0.8 / len(arms)
        for j, arm in enumerate(arms):
            part = sub[sub["arm"] == arm].set_index("condition").reindex(conds)
            pos = [k + (j - (len(arms) - 1) / 2) * width for k in range(len(conds))]
            ax.bar(
                pos, part[col], width=width, yerr=_err(part, col), capsize=2, color=arm_colors[arm], label=arm
            )
        ax.set_xticks(range(len(conds)), conds, rotation=90, fontsize=7)  # upright names cannot collide
        ax.set_ylim(bottom=0)  # rates and counts: an all-zero panel still starts at 0
        if len(arms) > 1:
            ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out, "interface", notice)


def draw_all(
    tables: dict[str, pd.DataFrame], lineages: list[str], baseline: str, out: Path, notice: str | None = None
) -> list[Path]:
    with plt.rc_context(_RC):
        paths = delta_utility_asr(tables["main"], tables["lineage"], lineages, out, baseline, notice)
        paths += exposure_casr(tables["main"], out, notice)
        paths += harm(tables["harm"], out, notice)
        paths += interface(tables["interface"], out, notice)
    return paths


def draw_rounds(rounds: pd.DataFrame, out: Path, notice: str | None = None) -> list[Path]:
    """Drift per evolution round (the rounds table): one panel per metric, a line per condition pooled
    over lineages with its interval, and each lineage (a repetition) as a thin line."""
    metrics = [("utility", "benign utility"), ("exposure", "exposure"), ("asr", "ASR"), ("unauth", "unauth")]
    metrics.append(("artifact_chars", "artifact length (characters)"))
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.4))
        if rounds.empty:
            for ax in axes:
                _empty(ax, "no later-round episodes in this run")
            return save_figure(fig, out, "rounds", notice)
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for ax, (col, title) in zip(axes, metrics, strict=True):
            for i, (cond, rows) in enumerate(rounds.groupby("condition", sort=False)):
                colour = colours[i % len(colours)]
                for _, one in rows[rows["lineage"] != "all"].groupby("lineage"):
                    ax.plot(one["round"], one[col], color=colour, alpha=0.3, linewidth=0.8)
                pooled = rows[rows["lineage"] == "all"].sort_values("round")
                if f"{col}_lo" in pooled:
                    ax.errorbar(
                        pooled["round"],
                        pooled[col],
                        yerr=_err(pooled, col),
                        color=colour,
                        marker="o",
                        capsize=3,
                        label=cond,
                    )
                else:
                    ax.plot(pooled["round"], pooled[col], color=colour, marker="o", label=cond)
            ax.set_title(title)
            ax.set_xlabel("round")
            ax.set_xticks(sorted(rounds["round"].unique()))
        axes[0].legend(fontsize=7)
        return save_figure(fig, out, "rounds", notice)
