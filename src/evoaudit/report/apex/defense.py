"""APEX-Harm's defence table (the defence axis, config key ``defenses``): each model's main run under each
defence against the undefended run, with the difference's cluster-bootstrap interval over tasks.

Both runs are the same tasks, worlds, attack set, models and seeds; only what the model sees differs
(``suite.defenses``). The metrics are ``scores``' functions (benign utility and task score; attacked
utility under attack, exposure rate over categories 1–4, ASR) and ``metrics.unauthorized_state_change``,
so the table means what the main report's does; the judge stage's final decisions are applied to both
runs first.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from evoaudit.records import Rollout
from evoaudit.report import metrics as m
from evoaudit.report.apex import scores as sc
from evoaudit.report.metrics import Ratio
from evoaudit.report.pages import html_page, table_html
from evoaudit.report.run_index import INDEX_FROM_ABLATION
from evoaudit.report.stats import FamilyBootstrap
from evoaudit.report.tables import put_delta

# (column, arm, metric): the arm's episodes the metric is over.
METRICS: tuple[tuple[str, str, Callable[[list[Rollout]], Ratio]], ...] = (
    ("utility", "benign", sc.utility),
    ("task_score", "benign", sc.task_score),
    ("utility_attack", "attacked", sc.utility_under_attack),
    ("exposure_rate", "attacked", sc.exposure_rate),
    ("asr", "attacked", sc.asr),
    ("unauth", "attacked", m.unauthorized_state_change),
)

TITLE = "APEX-Harm defences: each defence against the undefended run"
INTRO = (
    "A named extension (config key defenses), not part of APEX-Harm's protocol. Per (defence, model): "
    "utility and task score over n_benign benign episodes; utility under attack, ASR and unauthorised state "
    "change over n_attacked attacked episodes, exposure rate over n_exposure_defined attacked episodes of "
    "categories 1-4; d_* = defended − undefended on the same episodes (same task, attack, repeat and "
    "seed), interval over tasks."
)


def judged_rollouts(shards: list[str], judge_files: list[str], policy: str, what: str) -> list[Rollout]:
    """One run's rollouts with the judge stage's final decisions applied (checked against the rollouts
    first, without asking again) and the failure policy applied, as the ablation table takes its arms."""
    from evoaudit.evaluate.apex_judge import read_judged
    from evoaudit.jsonl import read_records
    from evoaudit.replay.apex import check_judged
    from evoaudit.report.apex.judged import apply_judged

    rollouts = [r for p in shards for r in read_records(p, Rollout)]
    judged = read_judged(Path(p) for p in judge_files)
    mismatches = check_judged(rollouts, judged)
    if mismatches:
        raise ValueError(
            f"{what}: {len(mismatches)} judge decisions do not match the rollouts, e.g. "
            f"{next(iter(mismatches))}; rerun its apex_judge rule"
        )
    return sc.scored(apply_judged(rollouts, judged), policy)


def defense_table(
    base: list[Rollout], defended: dict[str, list[Rollout]], boot: FamilyBootstrap
) -> pd.DataFrame:
    """One row per (defence, model), the undefended run first as defence ``none``."""
    rows: list[dict[str, Any]] = []
    models = sorted({r.condition for r in base})
    for name, rs in [("none", base), *defended.items()]:
        for model in models:
            mine = [r for r in rs if r.condition == model]
            theirs = [r for r in base if r.condition == model]
            row: dict[str, Any] = {"defense": name, "model": model}
            arms = {a: [r for r in mine if r.arm == a] for a in ("benign", "attacked")}
            row["n_benign"], row["n_attacked"] = len(arms["benign"]), len(arms["attacked"])
            row["n_exposure_defined"] = sc.exposure_rate(arms["attacked"]).den
            for col, arm, metric in METRICS:
                row[col] = metric(arms[arm]).value if arms[arm] else math.nan
                if name == "none":
                    continue
                twins = [r for r in theirs if r.arm == arm]
                m.same_seeds(arms[arm], twins, f"APEX-Harm defence table, {name} on {model} ({arm})")
                put_delta(row, col, boot, arms[arm], twins, metric)
            rows.append(row)
    columns = ["defense", "model", "n_benign", "n_attacked", "n_exposure_defined"]
    columns += [c for col, _, _ in METRICS for c in (col, f"d_{col}", f"d_{col}_lo", f"d_{col}_hi")]
    frame = pd.DataFrame(rows)
    for c in columns:
        if c not in frame.columns:
            frame[c] = math.nan
    return frame[columns] if len(frame) else pd.DataFrame(columns=columns)


def write_table(frame: pd.DataFrame, out_csv: Path, notice: str | None, provenance: dict[str, Any]) -> None:
    """The table as CSV and parquet (``report.files``, which stamps the simulator notice) and its page."""
    from evoaudit.report.files import write_table as write_files

    write_files(frame, out_csv, notice, float_format="%.6f")
    intro = INTRO
    if notice:
        intro += (
            " On the simulator this is a mechanism check: the simulator reacts to a defence's text only "
            "through its cue table, so no number here measures a defence against a model."
        )
    prov = html.escape(str(provenance))
    body = f"{table_html(frame)}<h3>Runs</h3><pre>{prov}</pre>"
    out_csv.with_suffix(".html").write_text(html_page(TITLE, intro, body, notice, back=INDEX_FROM_ABLATION))
