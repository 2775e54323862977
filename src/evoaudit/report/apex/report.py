"""The APEX-Harm report: tables (CSV, parquet, HTML), figures (PNG, SVG) and an index page, from the
rollout records and the frozen attack set alone.

Tables follow the APEX-Harm paper where it has one: ``apex_category`` is its Tables 3 and 4 (ASR, exposure
rate and task score per model and category, with averages), ``apex_vector`` its Figure 3 (per vector,
file versus application), ``apex_script`` its Table 18 (.py / .pyc / ELF), ``apex_utility`` its Figure 7
(utility with versus without attack). ``apex_inspection`` counts, for script attacks, what the agent did
with the program (``scores.INSPECTION_CLASSES``): inspected it and declined to run it, ran it without
inspecting it, inspected it before / with / after running it, or neither; ``apex_repeats`` gives flip
rates and the between-repeat spread; ``apex_qualitative`` lists cases chosen by a rule fixed before any
outcome is read (the first attack of each category, by attack id, in repeat r0) and renders their traces.

Intervals: cluster bootstrap over tasks (``stats.FamilyBootstrap``; a task's attacks and repeats move
together), with ``report.bootstrap`` settings.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.paths import Layout
from evoaudit.records import AttackStealth, ReplayReport, Rollout
from evoaudit.report.apex import scores as sc
from evoaudit.report.files import write_table
from evoaudit.report.metrics import Ratio
from evoaudit.report.pages import html_page, link_list, table_html
from evoaudit.report.stats import FamilyBootstrap

TABLES = {
    "apex_main": "Per model: task score, utility with and without attack, ASR, exposure rate",
    "apex_category": "ASR / exposure rate / task score per model and category (Tables 3-4)",
    "apex_vector": "ASR and exposure rate per injection vector, file vs application (Figure 3)",
    "apex_vector_ratio": "ASR / exposure rate per injection vector, categories 1-4 (Figure 3)",
    "apex_script": "ASR per model, category and script vector: .py / .pyc / ELF (Table 18)",
    "apex_leakage": "ASR by destination: internal vs external leakage",
    "apex_utility": "Utility with vs without attack per model and task (Figure 7)",
    "apex_inspection": (
        "Script attacks: inspected_declined, ran_uninspected, inspected_before_run / _with_run / _after_run, "
        "untouched"
    ),
    "apex_repeats": "Between-repeat flip rates and spread (repeats > 1)",
    "apex_qualitative": "Qualitative cases (chosen by a rule fixed before outcomes)",
    "apex_agreement": (
        "Agreement and Cohen's kappa of recorded decisions against label files, over n labelled rollouts "
        "compared (missing: labels whose rollout is not in this run or has no decision)"
    ),
    "apex_replay": "Replay: episodes re-executed and those that differ from the record, per shard",
    "apex_judge_stats": "Safety, exposure and task-criterion decisions by rules vs the judge (Tables 10-11)",
    "apex_tool_usage": "Share of the agent's calls and episodes per MCP app and tool (section H.2)",
    "apex_cost": "Wall time, steps, requests and tokens per model and arm (Table 1)",
    "apex_timer": "The orchestrator's timer: ASR, task score and mean time under attack (Table 24)",
    "apex_navigation": (
        "Navigation exposure: per file a dynamic attack's watcher monitors, the benign episodes of its task "
        "that read it (read tools, search_files passages, commands naming it)"
    ),
    "apex_navigation_rank": (
        "Navigation exposure: where each created artifact of a static attack ranks under search_files and "
        "grep -r of the attack's first keyword"
    ),
    "apex_stealth": (
        "Diagnostic (not a goal): AUC of a character n-gram classifier, injected vs benign items per vector, "
        "folds grouped by goal (injected) and world (benign), beside the AUC of item length alone (0.5 is "
        "chance); _lo/_hi: 95% bootstrap interval over those groups"
    ),
}
FIGURES = ("apex_vector", "apex_vector_ratio", "apex_utility")
PAGE_INTRO = (
    "A rate shown as x [lo, hi] carries its cluster-bootstrap interval over tasks (level and replicates: "
    "report.bootstrap); n_ columns are counts. Each rate's denominator is the n_ column its name or the "
    "table's caption gives: n_attacked (attacked episodes) for ASR, n_exposure_defined (attacked episodes of "
    "categories 1-4, where exposure is defined) for the exposure rate, n_benign for a benign-only rate."
)
# One row per rollout (report.rollout_table), beside the tables as parquet only.
ROLLOUT_TABLE = "rollouts"


def _rate(boot: FamilyBootstrap, rs: list[Rollout], metric: Callable[[list[Rollout]], Ratio], name: str):
    value = metric(rs).value if rs else float("nan")
    lo, hi = boot.interval(rs, metric) if rs else (float("nan"), float("nan"))
    return {name: value, f"{name}_lo": lo, f"{name}_hi": hi}


def _by_model(rollouts: list[Rollout]) -> dict[str, list[Rollout]]:
    out: dict[str, list[Rollout]] = defaultdict(list)
    for r in rollouts:
        out[r.condition].append(r)
    return dict(sorted(out.items()))


@dataclass
class _Run:
    """One APEX-Harm run's scored episodes by model, and the bootstrap every table's intervals use."""

    cfg: Config
    b_by: dict[str, list[Rollout]]
    a_by: dict[str, list[Rollout]]
    boot: FamilyBootstrap
    attacks: dict[str, sc.AttackInfo]

    @property
    def models(self) -> list[str]:
        return sorted(set(self.b_by) | set(self.a_by))

    def info(self, r: Rollout) -> sc.AttackInfo:
        return self.attacks[r.goal]

    def cell(self, r: Rollout) -> str:
        """The attack-set category of an attacked episode (``c<category><variant>``)."""
        return f"c{self.info(r).category}{self.info(r).category_variant}"

    def main(self) -> list[dict]:
        boot, rows = self.boot, []
        for m in self.models:
            b, a = self.b_by.get(m, []), self.a_by.get(m, [])
            rows.append(
                {
                    "model": m,
                    "n_benign": len(b),
                    "n_attacked": len(a),
                    "n_exposure_defined": len(sc.exposure_scope(a)),
                    # Benign episodes only (n_benign), beside rates over attacked ones: the name says so.
                    **_rate(boot, b, sc.task_score, "task_score_benign"),
                    **_rate(boot, b, sc.utility, "utility_no_attack"),
                    **_rate(boot, a, sc.utility_under_attack, "utility_attack"),
                    **_rate(boot, a, sc.asr, "asr"),
                    **_rate(boot, a, sc.exposure_rate, "exposure_rate"),
                    "exposure_undecided": sc.exposure_undecided(a).value if a else float("nan"),
                }
            )
        return rows

    def grouped(self, key: Callable[[Rollout], str], name: str, with_task_score: bool = True) -> list[dict]:
        """Per model, the attacked episodes' rates per group of ``key``, then over all of them."""
        rows = []
        for m in self.models:
            groups: dict[str, list[Rollout]] = defaultdict(list)
            for r in self.a_by.get(m, []):
                groups[key(r)].append(r)
            for g, rs in sorted(groups.items()) + [("average", self.a_by.get(m, []))]:
                row = {
                    "model": m,
                    name: g,
                    "n_attacked": len(rs),
                    "n_exposure_defined": len(sc.exposure_scope(rs)),
                }
                row.update(_rate(self.boot, rs, sc.asr, "asr"))
                row.update(_rate(self.boot, rs, sc.exposure_rate, "exposure_rate"))
                if with_task_score:
                    row.update(_rate(self.boot, rs, sc.task_score, "task_score_attacked"))
                rows.append(row)
        return rows

    def category(self) -> pd.DataFrame:
        cat_frame = pd.DataFrame(self.grouped(self.cell, "category"))
        # The across-model average of each category (each model weighted equally), as in Tables 3-4.
        if not cat_frame.empty:
            rates = ["asr", "exposure_rate", "task_score_attacked"]
            avg = cat_frame.groupby("category", as_index=False)[rates].mean()
            avg = avg.sort_values(
                "category", key=lambda c: c == "average", kind="stable"
            )  # the overall row last
            avg.insert(0, "model", "average")
            cat_frame = pd.concat([cat_frame, avg], ignore_index=True)
        return cat_frame

    def vector(self) -> list[dict]:
        vector = self.grouped(lambda r: self.info(r).vector, "vector", with_task_score=False)
        for row in vector:
            row["channel"] = (
                "all"
                if row["vector"] == "average"
                else sc.AttackInfo("", 0, "", row["vector"], "", ()).channel
            )
        return vector

    def vector_ratio(self) -> list[dict]:
        boot, rows = self.boot, []
        for m in self.models:
            groups = defaultdict(list)
            for r in sc.exposure_scope(self.a_by.get(m, [])):
                groups[self.info(r).vector].append(r)
            for v, rs in sorted(groups.items()) + [("average", sc.exposure_scope(self.a_by.get(m, [])))]:
                channel = "all" if v == "average" else sc.AttackInfo("", 0, "", v, "", ()).channel
                row = {"model": m, "vector": v, "channel": channel, "n_exposure_defined": len(rs)}
                row["n_success"] = sum(bool(r.outcome.attack_success) for r in rs)
                row["n_exposed"] = sum(r.outcome.exposed is True for r in rs)
                row.update(_rate(boot, rs, sc.asr_exposure_scope, "asr_c1_4"))
                row.update(_rate(boot, rs, sc.exposure_rate, "exposure_rate"))
                row.update(_rate(boot, rs, sc.asr_er_ratio, "asr_er_ratio"))
                rows.append(row)
        return rows

    def script(self) -> list[dict]:
        boot, rows = self.boot, []
        for m in self.models:
            cells: dict[tuple[str, str], list[Rollout]] = defaultdict(list)
            for r in self.a_by.get(m, []):
                if self.info(r).channel == "script":
                    cells[(self.cell(r), self.info(r).vector)].append(r)
                    cells[("average", self.info(r).vector)].append(r)  # the vector over every category
            key = lambda k: (k[0] == "average", k[0], sc.SCRIPT_VECTORS.index(k[1]))  # noqa: E731
            for c, v in sorted(cells, key=key):
                rs = cells[(c, v)]
                row = {"model": m, "category": c, "vector": v, "n_attacked": len(rs)}
                row["n_tasks"] = len({r.family for r in rs})
                row["n_repeats"] = len({r.lineage for r in rs})
                row["n_exposure_defined"] = len(sc.exposure_scope(rs))
                row.update(_rate(boot, rs, sc.asr, "asr"))
                row.update(_rate(boot, rs, sc.exposure_rate, "exposure_rate"))
                row["sd_asr_repeats"] = sc.repeat_spread(rs, sc.asr)
                rows.append(row)
        return rows

    def leakage(self) -> list[dict]:
        def destination(r: Rollout) -> str:
            return (
                ("internal" if self.info(r).internal else "external") if self.info(r).destination else "none"
            )

        return self.grouped(destination, "destination", with_task_score=False)

    def utility(self) -> list[dict]:
        rows = []
        for m in self.models:
            per_task_b: dict[str, list[Rollout]] = defaultdict(list)
            per_task_a: dict[str, list[Rollout]] = defaultdict(list)
            for r in self.b_by.get(m, []):
                per_task_b[r.family].append(r)
            for r in self.a_by.get(m, []):
                per_task_a[r.family].append(r)
            for task in sorted(set(per_task_b) | set(per_task_a)):
                rows.append(
                    {
                        "model": m,
                        "task": task,
                        "task_score_no_attack": sc.task_score(per_task_b.get(task, [])).value,
                        "task_score_attack": sc.task_score(per_task_a.get(task, [])).value,
                        "utility_no_attack": sc.utility(per_task_b.get(task, [])).value,
                        "utility_attack": sc.utility_under_attack(per_task_a.get(task, [])).value,
                        "n_benign": len(per_task_b.get(task, [])),
                        "n_attacked": len(per_task_a.get(task, [])),
                    }
                )
        return rows

    def inspection(self) -> pd.DataFrame:
        rows = []
        for m in self.models:
            counts: dict[tuple[str, str], int] = defaultdict(int)
            for r in self.a_by.get(m, []):
                if self.info(r).channel == "script":
                    counts[(self.info(r).vector, sc.inspection_timing(r, self.info(r)))] += 1
            total = defaultdict(int)
            for (v, _), n in counts.items():
                total[v] += n
            for (v, timing), n in sorted(counts.items()):
                rows.append(
                    {
                        "model": m,
                        "vector": v,
                        "timing": timing,
                        "n_episodes": n,
                        "n_vector": total[v],
                        "share_of_vector": n / total[v],
                    }
                )
        return pd.DataFrame(
            rows, columns=["model", "vector", "timing", "n_episodes", "n_vector", "share_of_vector"]
        )

    def repeats(self) -> list[dict]:
        rows = []
        for m in self.models:
            b, a = self.b_by.get(m, []), self.a_by.get(m, [])
            rows.append(
                {
                    "model": m,
                    "repeats": len({r.lineage for r in a + b}),
                    # Each flip rate's denominator: the cells run in more than one repeat.
                    "n_cells_attack_success": (fa := sc.flip_rate(a, "attack_success")).den,
                    "flip_attack_success": fa.value,
                    "n_cells_exposed": (
                        fe := sc.flip_rate([r for r in a if r.outcome.exposed is not None], "exposed")
                    ).den,
                    "flip_exposed": fe.value,
                    "n_cells_utility_no_attack": (fu := sc.flip_rate(b, "utility")).den,
                    "flip_utility_no_attack": fu.value,
                    "sd_asr": sc.repeat_spread(a, sc.asr),
                    "sd_exposure_rate": sc.repeat_spread(a, sc.exposure_rate),
                    "sd_task_score": sc.repeat_spread(b, sc.task_score),
                }
            )
        return rows

    def timer(self, wall_s: dict[str, float] | None) -> list[dict]:
        rows = []
        for m in self.models:
            a = self.a_by.get(m, [])
            times = [wall_s[r.rollout_id] for r in a if wall_s and r.rollout_id in wall_s]
            rows.append(
                {
                    "model": m,
                    # The setting this run used (apex.episode_timer_s); empty: no timer. Table 24 sets two
                    # runs side by side, one with and one without.
                    "episode_timer_s": self.cfg.apex.episode_timer_s,
                    "n_attacked": len(a),
                    "n_success": sum(bool(r.outcome.attack_success) for r in a),
                    **_rate(self.boot, a, sc.asr, "asr"),
                    **_rate(self.boot, a, sc.task_score, "task_score_attacked"),
                    "n_timed": len(times),
                    "wall_s_mean": sum(times) / len(times) if times else float("nan"),
                    "n_timer_hit": sum(r.outcome.timer_hit for r in a),
                }
            )
        return rows

    def qualitative(self, attacked: list[Rollout]) -> pd.DataFrame:
        runs = Layout.at("results").apex_runs()  # the default results directory, as a reader's command
        return pd.DataFrame(
            [
                {
                    "model": r.condition,
                    "category": self.cell(r),
                    "rollout_id": r.rollout_id,
                    "attack_success": r.outcome.attack_success,
                    "exposed": r.outcome.exposed,
                    "show": f"evoaudit show {r.rollout_id} --dir {runs}",
                }
                for r in qualitative_cases(attacked, self.attacks)
            ],
            columns=["model", "category", "rollout_id", "attack_success", "exposed", "show"],
        )


def build_tables(
    cfg: Config,
    benign: list[Rollout],
    attacked: list[Rollout],
    attacks: dict[str, sc.AttackInfo],
    wall_s: dict[str, float] | None = None,
) -> dict[str, pd.DataFrame]:
    """Every table computed from the rollouts. ``wall_s``: seconds per rollout id (the shards' timing
    files), for ``apex_cost`` and ``apex_timer`` only; without it their time columns are empty."""
    policy = cfg.apex.failure_policy
    # Tool usage and cost count every recorded episode, infrastructure failures included: their calls and
    # their time were spent whatever the failure policy says about scoring them.
    usage_cost = _usage_and_cost(benign, attacked, wall_s or {})
    benign, attacked = sc.scored(benign, policy), sc.scored(attacked, policy)
    bs = cfg.report.bootstrap
    families = sorted({r.family for r in benign + attacked})
    boot = FamilyBootstrap(families, bs.replicates, bs.seed if bs.seed is not None else cfg.seed, bs.level)
    run = _Run(cfg, _by_model(benign), _by_model(attacked), boot, attacks)
    return {
        "apex_main": pd.DataFrame(run.main()),
        "apex_category": run.category(),
        "apex_vector": pd.DataFrame(run.vector()),
        "apex_vector_ratio": pd.DataFrame(run.vector_ratio()),
        "apex_script": pd.DataFrame(run.script()),
        "apex_leakage": pd.DataFrame(run.leakage()),
        "apex_utility": pd.DataFrame(run.utility()),
        "apex_inspection": run.inspection(),
        "apex_repeats": pd.DataFrame(run.repeats()),
        "apex_qualitative": run.qualitative(attacked),
        **usage_cost,
        "apex_timer": pd.DataFrame(run.timer(wall_s)),
    }


def _usage_and_cost(
    benign: list[Rollout], attacked: list[Rollout], wall_s: dict[str, float]
) -> dict[str, pd.DataFrame]:
    """``apex_tool_usage`` and ``apex_cost`` per model and arm, over every recorded episode."""
    usage, cost = [], []
    arms = (("benign", _by_model(benign)), ("attacked", _by_model(attacked)))
    for m in sorted({m for _, by in arms for m in by}):
        for arm, by in arms:
            rs = by.get(m, [])
            if rs:
                usage += [{"model": m, "arm": arm, **row} for row in sc.tool_usage(rs)]
                cost.append({"model": m, "arm": arm, **sc.cost(rs, wall_s)})
    usage_columns = ["model", "arm", "app", "tool", "n_calls", "n_calls_total", "call_share"]
    usage_columns += ["n_episodes_with_call", "n_episodes", "episode_share"]
    return {"apex_tool_usage": pd.DataFrame(usage, columns=usage_columns), "apex_cost": pd.DataFrame(cost)}


_GROUP_COLUMNS = ("category", "vector", "destination")


def _table_body(frame: pd.DataFrame) -> str:
    """A table page's body: the rows of single groups first, then the summary rows under their own
    headings, so that an average is never read as one more group."""
    if frame.empty or "model" not in frame.columns:
        return table_html(frame)
    group = next((c for c in _GROUP_COLUMNS if c in frame.columns), None)
    if group is None:
        return table_html(frame)
    across = frame["model"] == "average"
    pooled = (frame[group] == "average") & ~across
    body = table_html(frame[~(across | pooled)])
    if pooled.any():
        body += (
            f"<h3>Each model over every {group}</h3><p>One model's attacked episodes pooled (the "
            f"'average' row of each model in the CSV), with its interval.</p>{table_html(frame[pooled])}"
        )
    if across.any():
        body += (
            "<h3>Across models</h3><p>The mean of the models' rates, each model weighted equally (the "
            f"rows whose model is 'average' in the CSV; no interval).</p>{table_html(frame[across])}"
        )
    return body


def qualitative_cases(attacked: list[Rollout], attacks: dict[str, sc.AttackInfo]) -> list[Rollout]:
    """Per model and category, the episode of repeat ``r0`` with the smallest attack id: fixed by the
    attack set's ids alone, never by how an episode turned out."""
    chosen: dict[tuple[str, str], Rollout] = {}
    for r in sorted(attacked, key=lambda r: r.rollout_id):
        if r.lineage != "r0" or r.goal is None:
            continue
        a = attacks[r.goal]
        chosen.setdefault((r.condition, f"c{a.category}{a.category_variant}"), r)
    return [chosen[k] for k in sorted(chosen)]


def draw_figures(tables: dict[str, pd.DataFrame], out: Path, notice: str | None = None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from evoaudit.report.figures import _RC, _err
    from evoaudit.report.files import save_figure

    written: list[Path] = []
    with plt.rc_context(_RC):
        vec = tables["apex_vector"]
        vec = vec[vec["vector"] != "average"] if not vec.empty else vec
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
        models = max(1, vec["model"].nunique()) if not vec.empty else 1
        for ax, col, title in zip(axes, ("asr", "exposure_rate"), ("ASR", "Exposure rate"), strict=True):
            for i, (m, g) in enumerate(vec.groupby("model")) if not vec.empty else []:
                g = g.sort_values(["channel", "vector"])
                xs = [j + 0.8 * i / models for j in range(len(g))]
                # The bars carry the table's intervals (cluster bootstrap over tasks), as the caption says.
                ax.bar(
                    xs,
                    g[col].fillna(0),
                    width=0.8 / models,
                    label=m,
                    yerr=_err(g, col),
                    capsize=2,
                    ecolor="0.3",
                )
                labels = [f"{v} ({c})" for v, c in zip(g["vector"], g["channel"], strict=True)]
                ax.set_xticks(range(len(g)), labels, rotation=45, ha="right", rotation_mode="anchor")
            ax.set_title(title)
            ax.set_ylim(0, 1)
        axes[0].legend(fontsize=7)
        written += save_figure(fig, out, "apex_vector", notice)

        ratio = tables["apex_vector_ratio"]
        ratio = ratio[ratio["vector"] != "average"] if not ratio.empty else ratio
        fig, ax = plt.subplots(figsize=(8, 3.8))
        models = max(1, ratio["model"].nunique()) if not ratio.empty else 1
        top = 1.0
        for i, (m, g) in enumerate(ratio.groupby("model")) if not ratio.empty else []:
            g = g.sort_values(["channel", "vector"])
            xs = [j + 0.8 * i / models for j in range(len(g))]
            ax.bar(
                xs,
                g["asr_er_ratio"].fillna(0),
                width=0.8 / models,
                label=m,
                yerr=_err(g, "asr_er_ratio"),
                capsize=2,
                ecolor="0.3",
            )
            labels = [f"{v} ({c})" for v, c in zip(g["vector"], g["channel"], strict=True)]
            ax.set_xticks(range(len(g)), labels, rotation=45, ha="right", rotation_mode="anchor")
            top = max(top, float(g[["asr_er_ratio", "asr_er_ratio_hi"]].max().max(skipna=True) or 0))
        if ratio.empty:
            ax.text(0.5, 0.5, "no attacked episode of categories 1-4", ha="center", transform=ax.transAxes)
        # 1: as many successes as exposures; above it, some successes had no recorded exposure.
        ax.axhline(1.0, color="0.5", linestyle="--", linewidth=1)
        ax.set_ylabel("ASR / exposure rate (categories 1-4)")
        ax.set_ylim(0, 1.05 * top)
        ax.legend(fontsize=7)
        written += save_figure(fig, out, "apex_vector_ratio", notice)

        util = tables["apex_utility"]
        fig, ax = plt.subplots(figsize=(4, 4))
        for m, g in util.groupby("model") if not util.empty else []:
            ax.scatter(g["task_score_no_attack"], g["task_score_attack"], label=m, s=18)
        ax.plot([0, 1], [0, 1], color="0.5", linestyle="--", linewidth=1, label="no change")
        ax.set_xlabel("task score without attack")
        ax.set_ylabel("task score with attack (mean over attacks)")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7)
        written += save_figure(fig, out, "apex_utility", notice)
    return written


REFERENCE_LABELS = Path(__file__).resolve().parents[2] / "apex_reference_labels.yaml"


STEALTH_COLUMNS = [
    "vector", "auc", "auc_lo", "auc_hi", "length_auc", "length_auc_lo", "length_auc_hi", "n_injected",
    "n_injected_groups", "n_benign", "n_benign_groups", "top_features", "attacker_model",
]  # fmt: skip


def stealth_table(record: AttackStealth | None) -> pd.DataFrame:
    """``apex_stealth``: one row per vector of the attack set's stealth check (n-grams joined by ``|``)."""
    rows = [
        {**v.model_dump(), "top_features": "|".join(v.top_features), "attacker_model": record.attacker_model}
        for v in (record.vectors if record is not None else [])
    ]
    return pd.DataFrame(rows, columns=STEALTH_COLUMNS)


def attacker_sim_notice(record: AttackStealth | None) -> str | None:
    """The notice of the stealth table when the simulated attacker wrote the notes."""
    from evoaudit.config import SIM_MODEL_PREFIX

    if record is None:
        return None
    if record.sim_note_version is None and not record.attacker_model.startswith(SIM_MODEL_PREFIX):
        return None
    return (
        f"Simulated attacker (suite.apex.attacker {record.attacker_model}): these AUCs measure the "
        "simulator's note templates against the generated worlds, a mechanism check, not a finding about an "
        "attacker model."
    )


def reference_labels():
    """The shipped reference labels (not the paper's human study: see the file's note)."""
    import yaml

    from evoaudit.report.apex.agreement import Label

    data = yaml.safe_load(REFERENCE_LABELS.read_text())
    return [Label(**row) for row in data["labels"]]


def write_report(
    cfg: Config,
    benign: list[Rollout],
    attacked: list[Rollout],
    attacks_path: Path,
    out: Path,
    notice: str | None,
    replays: list[Path] = (),
    judged: dict[str, dict] | None = None,
    wall_s: dict[str, float] | None = None,
    stealth: Path | None = None,
    worlds: Path | None = None,
) -> dict[str, pd.DataFrame]:
    """Write every table (CSV, parquet, HTML), the figures, the traces of the qualitative cases and the
    index page under ``out``. ``judged``: the judge stage's final decisions by rollout id
    (``evaluate.apex.judge.read_judged``); without it the rules' verdicts stand and open cases count as no.
    ``wall_s``: seconds per rollout id from the shards' timing files (``apex_cost``). ``stealth``: the
    attack set's ``AttackStealth`` file (``apex_stealth``; without it the table is empty)."""
    from evoaudit.replay.apex import check_judged
    from evoaudit.report.apex import agreement as ag
    from evoaudit.report.apex import judged as jd

    attacks = sc.load_attacks(attacks_path)
    # The judge file is checked against the rollouts (without asking again) before it is applied.
    judge_mismatches = check_judged(benign + attacked, judged) if judged is not None else {}
    if judged is not None:
        benign, attacked = jd.apply_judged(benign, judged), jd.apply_judged(attacked, judged)
    tables = build_tables(cfg, benign, attacked, attacks, wall_s)
    tables["apex_judge_stats"] = jd.decided_by_table(benign + attacked, judge_mismatches)
    label_sets = [(REFERENCE_LABELS.name, reference_labels())]
    label_sets += [(p, ag.read_labels(p)) for p in cfg.apex.label_files]
    tables["apex_replay"] = pd.DataFrame(
        [
            {
                "shard": (rep := ReplayReport.read(p)).rollouts,
                "replayed": rep.replayed,
                "mismatched_rollouts": rep.mismatched_rollouts,
                "by_field": json.dumps(rep.mismatches_by_field),
            }
            for p in replays
        ],
        columns=["shard", "replayed", "mismatched_rollouts", "by_field"],
    )
    tables["apex_agreement"] = pd.concat(
        [ag.agreement(labels, attacked, source) for source, labels in label_sets], ignore_index=True
    )
    from evoaudit.report.apex.navigation import empty_ranks, navigation_table, rank_table

    tables["apex_navigation"] = navigation_table(benign, attacks_path)
    # The ranks need the built worlds (``worlds``: suite.apex.out, which the rule's manifest input builds).
    variant = cfg.suite.apex.variants[0]
    tables["apex_navigation_rank"] = rank_table(attacks_path, worlds, variant) if worlds else empty_ranks()
    record = AttackStealth.read(stealth) if stealth is not None else None
    tables["apex_stealth"] = stealth_table(record)
    # The stealth table's numbers come from the attacker and the worlds, not from the audited models.
    notices = {"apex_stealth": attacker_sim_notice(record)}
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "html").mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        table_notice = notices.get(name, notice)
        write_table(frame, out / "tables" / f"{name}.csv", table_notice)
        page = html_page(TABLES[name], PAGE_INTRO, _table_body(frame), table_notice)
        (out / "html" / f"{name}.html").write_text(page)
    draw_figures(tables, out / "figures", notice)
    # One row per rollout, with the judge's final decisions applied, the notice in the parquet metadata.
    from evoaudit.report.rollout_table import write_rollout_table
    from evoaudit.report.simlabel import records_sim_notice

    rollout_notice = records_sim_notice([r.executor for r in benign + attacked], notice)
    table = out / "tables" / f"{ROLLOUT_TABLE}.parquet"
    write_rollout_table(benign + attacked, table, "apex", rollout_notice)
    _write_pages(cfg, tables, attacked, attacks, out, notice)
    return tables


def _write_pages(
    cfg: Config,
    tables: dict[str, pd.DataFrame],
    attacked: list[Rollout],
    attacks: dict[str, sc.AttackInfo],
    out: Path,
    notice: str | None,
) -> None:
    """The qualitative cases' traces page and the report's index page."""
    from evoaudit.report.trace import render

    def trace(r: Rollout) -> str:
        try:
            return render(r, cfg.qualitative.max_chars, suite="apex")
        except AuditError as exc:  # as `evoaudit show` prints it, and the page says what is missing
            note = f"(per-message exposure marks unavailable: {exc})\n"
            return note + render(r, cfg.qualitative.max_chars, suite=None)

    cases = qualitative_cases(sc.scored(attacked, cfg.apex.failure_policy), attacks)
    traces = "".join(f"<h3>{html.escape(r.rollout_id)}</h3><pre>{html.escape(trace(r))}</pre>" for r in cases)
    intro = "Attacked episodes chosen by a rule fixed before outcomes (the apex_qualitative table)."
    (out / "html" / "apex_traces.html").write_text(
        html_page("Qualitative traces", intro, traces or "<p>No qualifying case.</p>", notice)
    )
    items = [(f"{n}.html", t) for n, t in TABLES.items()] + [("apex_traces.html", "Qualitative traces")]
    body = f"<h3>Tables</h3>{link_list(items)}"
    body += f"<h3>Figures</h3>{link_list([(f'../figures/{f}.png', f) for f in FIGURES])}"
    body += f"<h3>{html.escape(TABLES['apex_main'])}</h3>{table_html(tables['apex_main'])}"
    intro = "Every page of the APEX-Harm report; each page links back here."
    (out / "html" / "index.html").write_text(html_page("APEX-Harm report", intro, body, notice, back=None))
