"""Figures (PNG and SVG) drawn from the report's tables only, so a figure never disagrees with a table."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: no display on cluster nodes

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from evoaudit.report.names import FIGURES  # noqa: E402, F401 - re-exported for callers

# Fixed SVG ids and no timestamps: the same tables give the same files.
_RC = {"svg.hashsalt": "evoaudit", "font.size": 9, "figure.dpi": 100}


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    fig.savefig(png, dpi=150, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(svg, bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return [png, svg]


def _err(frame: pd.DataFrame, col: str) -> list[list[float]]:
    lo = (frame[col] - frame[f"{col}_lo"]).clip(lower=0).fillna(0)
    hi = (frame[f"{col}_hi"] - frame[col]).clip(lower=0).fillna(0)
    return [lo.tolist(), hi.tolist()]


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def delta_utility_asr(
    main: pd.DataFrame, lineage: pd.DataFrame, lineages: list[str], out: Path, baseline: str
):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    rows = main[main["condition"] != baseline].dropna(subset=["d_utility", "d_asr"])
    if rows.empty:
        _empty(ax, f"no condition with a delta against {baseline} in this run")
    colors = plt.get_cmap("tab10")
    for i, (_, r) in enumerate(rows.iterrows()):
        c = colors(i % 10)
        lu = lineage[(lineage["condition"] == r["condition"]) & (lineage["metric"] == "utility")]
        la = lineage[(lineage["condition"] == r["condition"]) & (lineage["metric"] == "asr")]
        if not lu.empty and not la.empty:
            xs = [lu.iloc[0][f"d_{lin}"] for lin in lineages]
            ys = [la.iloc[0][f"d_{lin}"] for lin in lineages]
            ax.scatter(xs, ys, color=c, s=14, alpha=0.5, marker="o")
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
        )
    ax.axhline(0, color="0.6", lw=0.8)
    ax.axvline(0, color="0.6", lw=0.8)
    ax.set_xlabel(f"Δ benign utility vs {baseline}")
    ax.set_ylabel(f"Δ ASR vs {baseline}")
    ax.set_title("Capability vs security change (diamond: pooled, 95% CI; dots: lineages)")
    if not rows.empty:
        ax.legend(fontsize=7, loc="best")
    return _save(fig, out, "delta_utility_asr")


def exposure_casr(main: pd.DataFrame, out: Path):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    xs = [i / 100 for i in range(1, 101)]
    for level in (0.1, 0.2, 0.3, 0.5):
        ax.plot(xs, [min(level / x, 1.05) for x in xs], color="0.85", lw=0.8)
        ax.text(1.0, level, f"ASR={level}", fontsize=6, color="0.5", ha="right", va="bottom")
    rows = main.dropna(subset=["exposure"])
    colors = plt.get_cmap("tab10")
    for i, (_, r) in enumerate(rows.iterrows()):
        y = r["casr"] if not math.isnan(r["casr"]) else 0.0
        ax.errorbar(
            [r["exposure"]],
            [y],
            xerr=_err(rows.loc[[r.name]], "exposure"),
            yerr=_err(rows.loc[[r.name]], "casr"),
            color=colors(i % 10),
            marker="o",
            capsize=3,
            label=r["condition"],
        )
    if rows.empty:
        _empty(ax, "no attacked episodes in this run")
    else:
        ax.legend(fontsize=7, loc="best")
    ax.set_xlim(0, 1.05)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("exposure = P(injected text reached the model)")
    ax.set_ylabel("conditional ASR = P(goal achieved | exposed)")
    ax.set_title("ASR = exposure × conditional ASR (grey: iso-ASR curves)")
    return _save(fig, out, "exposure_casr")


def harm(harm_table: pd.DataFrame, out: Path):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    conds = harm_table["condition"].tolist()
    if not conds:
        _empty(ax1, "no attacked episodes in this run")
        _empty(ax2, "")
        return _save(fig, out, "harm")
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
    ax1.tick_params(axis="x", rotation=30)
    cats = [c[: -len("_lo")] for c in harm_table.columns if c.endswith("_lo")]
    cats = [c for c in cats if c not in ("unauth", "asr_state", "extra_state", "disclosure")]
    width = 0.8 / max(len(cats), 1)
    for j, cat in enumerate(cats):
        pos = [i + (j - len(cats) / 2 + 0.5) * width for i in range(len(conds))]
        ax2.bar(pos, harm_table[cat], width=width, label=cat.replace("_", " "))
    ax2.set_xticks(range(len(conds)), conds, rotation=30)
    ax2.set_title("Harm categories")
    ax2.legend(fontsize=6)
    return _save(fig, out, "harm")


def interface(iface: pd.DataFrame, out: Path):
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.6))
    panels = (
        ("textual_action_rate", "textual-action rate", None),
        ("zero_call_rate", "zero-real-tool-call rate", None),
        ("mean_tool_calls", "mean real tool calls", None),
        ("read_call_rate", "attacked episodes with a read call", "attacked"),
    )
    for ax, (col, title, only) in zip(axes, panels, strict=True):
        sub = iface if only is None else iface[iface["arm"] == only]
        if sub.empty:
            _empty(ax, "not available")
            ax.set_title(title)
            continue
        labels = [
            f"{c}\n{a}" if only is None else c for c, a in zip(sub["condition"], sub["arm"], strict=True)
        ]
        ax.bar(range(len(sub)), sub[col], yerr=_err(sub, col), capsize=2, color="tab:blue")
        ax.set_xticks(range(len(sub)), labels, rotation=45, fontsize=6)
        ax.set_ylim(bottom=0)  # rates and counts: an all-zero panel still starts at 0
        ax.set_title(title)
    return _save(fig, out, "interface")


def draw_all(tables: dict[str, pd.DataFrame], lineages: list[str], baseline: str, out: Path) -> list[Path]:
    with plt.rc_context(_RC):
        paths = delta_utility_asr(tables["main"], tables["lineage"], lineages, out, baseline)
        paths += exposure_casr(tables["main"], out)
        paths += harm(tables["harm"], out)
        paths += interface(tables["interface"], out)
    return paths
