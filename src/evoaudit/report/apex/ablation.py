"""One APEX-Harm ablation's table: the ablated arm against the base arm (the main run), per model and
category, with the difference's cluster-bootstrap interval over tasks.

Both arms are attacked episodes of the same tasks, worlds, models and seeds; only the attack set differs
(``apex.ablations[].attacks``). Categories are the attack set's selectors (``c1``, ``c4perm``...), so an
ablation over ``c4`` shows permission on and off as two rows of each arm. ``delta`` is ablated minus base;
its interval resamples tasks once for both arms (``FamilyBootstrap.delta_interval``). ASR, exposure rate
and utility under attack are ``scores``' functions, so the table means what the main report's does.
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from evoaudit.records import Rollout
from evoaudit.report.apex import scores as sc
from evoaudit.report.metrics import Ratio
from evoaudit.report.pages import html_page, table_html
from evoaudit.report.run_index import INDEX_FROM_ABLATION
from evoaudit.report.stats import FamilyBootstrap

METRICS: dict[str, Callable[[list[Rollout]], Ratio]] = {
    "asr": sc.asr,
    "exposure_rate": sc.exposure_rate,
    "utility_attack": sc.utility_under_attack,
    # Both arms are attacked runs: the task score is the attacked episodes' (n_attacked_*).
    "task_score_attacked": sc.task_score,
}


def _groups(rs: list[Rollout], attacks: dict[str, sc.AttackInfo]) -> dict[tuple[str, str], list[Rollout]]:
    out: dict[tuple[str, str], list[Rollout]] = defaultdict(list)
    for r in rs:
        a = attacks[r.goal]
        out[(r.condition, f"c{a.category}{a.category_variant}")].append(r)
        out[(r.condition, "all")].append(r)
    return out


def _value(metric: Callable[[list[Rollout]], Ratio], rs: list[Rollout]) -> float:
    return metric(rs).value if rs else float("nan")


def ablation_table(
    base: list[Rollout],
    ablated: list[Rollout],
    base_attacks: dict[str, sc.AttackInfo],
    ablated_attacks: dict[str, sc.AttackInfo],
    boot: FamilyBootstrap,
) -> pd.DataFrame:
    """Per model and category (and ``all``): each metric in the base and ablated arm, their difference and
    its interval. A group present in one arm only keeps NaN for the other."""
    b, a = _groups(base, base_attacks), _groups(ablated, ablated_attacks)
    rows: list[dict[str, Any]] = []
    for model, category in sorted(set(b) | set(a), key=lambda k: (k[0], k[1] == "all", k[1])):
        rb, ra = b.get((model, category), []), a.get((model, category), [])
        # ASR, utility and task score are over n_attacked_*, the exposure rate over n_exposure_defined_*.
        row: dict[str, Any] = {"model": model, "category": category}
        row |= {"n_attacked_base": len(rb), "n_attacked_ablated": len(ra)}
        row |= {"n_exposure_defined_base": len(sc.exposure_scope(rb))}
        row |= {"n_exposure_defined_ablated": len(sc.exposure_scope(ra))}
        for name, metric in METRICS.items():
            vb, va = _value(metric, rb), _value(metric, ra)
            lo, hi = boot.delta_interval(ra, rb, metric) if ra and rb else (float("nan"), float("nan"))
            row |= {f"{name}_base": vb, f"{name}_ablated": va, f"{name}_delta": va - vb}
            row |= {f"{name}_delta_lo": lo, f"{name}_delta_hi": hi}
        rows.append(row)
    return pd.DataFrame(rows)


def write_table(
    name: str,
    changes: dict[str, Any],
    frame: pd.DataFrame,
    out_csv: Path,
    notice: str | None,
    provenance: dict[str, Any],
) -> None:
    """The table as CSV and parquet beside each other, and an HTML section naming what the arm changed."""
    from evoaudit.report.files import write_table as write_files

    write_files(frame, out_csv, notice)
    what = json.dumps(changes, sort_keys=True)
    prov = html.escape(json.dumps(provenance, indent=1, sort_keys=True))
    intro = (
        f"suite.apex.attacks changed in the ablated arm: {what}; delta = ablated − base, interval over tasks."
    )
    body = f"{table_html(frame)}<h3>Attack sets</h3><pre>{prov}</pre>"
    # Beside the APEX report's tables/ and html/: the run's index (RUN_INDEX) lists every ablation page.
    title = f"Ablation {name}: ablated arm versus base arm"
    out_csv.with_suffix(".html").write_text(html_page(title, intro, body, notice, back=INDEX_FROM_ABLATION))
