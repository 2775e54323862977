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

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.paths import DEFENSE
from evoaudit.records import Rollout
from evoaudit.report import metrics as m
from evoaudit.report.apex import scores as sc
from evoaudit.report.apex.judged import judged_rollouts, replay_totals
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


def _under(paths: list[str], defense: str) -> list[str]:
    """The files of ``paths`` under ``defense``'s directory (``apex/defense/<defense>/``)."""
    return [p for p in paths if f"/{DEFENSE}/{defense}/" in Path(p).as_posix()]


def defended_runs(
    defenses: list[str], shards: list[str], judge_files: list[str], policy: str
) -> dict[str, list[Rollout]]:
    """Each defence's judged rollouts, from the shards and judge files under its directory; a record
    whose ``defense`` field is not its directory's is an AuditError naming the defence and the rollout."""
    out = {}
    for d in defenses:
        rs = judged_rollouts(_under(shards, d), _under(judge_files, d), policy, f"defence {d}")
        wrong = next((r for r in rs if r.defense != d), None)
        if wrong is not None:
            raise AuditError(
                f"apex/defense/{d}/: rollout {wrong.rollout_id} says defense {wrong.defense!r}; the shards "
                f"under {d}'s directory must hold {d}'s episodes only"
            )
        out[d] = rs
    return out


def build_defense_table(
    cfg: Config,
    *,
    base: list[str],
    base_judged: list[str],
    defended: list[str],
    judged: list[str],
    replays: list[str],
    out_csv: Path,
) -> pd.DataFrame:
    """The rule ``apex_defense_table``: the undefended run and each APEX-Harm defence's (judged, the failure
    policy applied), the table, its files and their provenance (the defended replays' totals, the
    configured defences APEX-Harm does not run and why)."""
    from evoaudit.provenance import write_provenance
    from evoaudit.report.simlabel import apex_sim_notice as sim_notice
    from evoaudit.suite.defenses import NEEDS_ACQUISITION
    from evoaudit.suite.registry import get_suite, suite_defenses

    policy = cfg.apex.failure_policy
    base_rs = judged_rollouts(base, base_judged, policy, "undefended run")
    own = [d for d in suite_defenses("apex", cfg.defenses) if d not in NEEDS_ACQUISITION]
    runs = defended_runs(own, defended, judged, policy)
    bs = cfg.report.bootstrap
    families = sorted({r.family for r in base_rs})
    boot = FamilyBootstrap(families, bs.replicates, bs.seed if bs.seed is not None else cfg.seed, bs.level)
    refused = get_suite("apex").unsupported_defenses
    record = {
        "defenses": list(runs),
        "not_run_on_apex": {
            d: why for d, why in {**refused, **NEEDS_ACQUISITION}.items() if d in cfg.defenses
        },
        "defended_replay": replay_totals(replays),
    }
    frame = defense_table(base_rs, runs, boot)
    write_table(frame, out_csv, sim_notice(cfg), record)
    outs = [out_csv, out_csv.with_suffix(".parquet"), out_csv.with_suffix(".html")]
    write_provenance(outs, cfg, "apex_defense_table", **record)
    return frame


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
