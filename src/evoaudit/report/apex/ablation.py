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
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from evoaudit.config import Config
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
    orchestrator: dict[str, Any] | None = None,
) -> None:
    """The table as CSV and parquet beside each other, and an HTML section naming what the arm changed
    (``changes``: its attack switches; ``orchestrator``: its orchestrator settings, with that table's
    caption)."""
    from evoaudit.report.files import write_table as write_files

    write_files(frame, out_csv, notice)
    what = json.dumps(changes, sort_keys=True)
    prov = html.escape(json.dumps(provenance, indent=1, sort_keys=True))
    if orchestrator:
        intro = (
            f"Orchestrator settings changed in the ablated arm: {json.dumps(orchestrator, sort_keys=True)}; "
            f"suite.apex.attacks changed: {what}. {ORCHESTRATOR_CAPTION}"
        )
    else:
        intro = (
            f"suite.apex.attacks changed in the ablated arm: {what}; delta = ablated − base, interval over "
            "tasks."
        )
    body = f"{table_html(frame)}<h3>Attack sets</h3><pre>{prov}</pre>"
    # Beside the APEX report's tables/ and html/: the run's index (RUN_INDEX) lists every ablation page.
    title = f"Ablation {name}: ablated arm versus base arm"
    out_csv.with_suffix(".html").write_text(html_page(title, intro, body, notice, back=INDEX_FROM_ABLATION))


# --- orchestrator ablations (the timer, the paper's Table 24) ---------------------------------------------

#: The orchestrator table's caption: what each column counts (the HTML page and the workflow report's).
ORCHESTRATOR_CAPTION = (
    "Per model, one row per arm (base: the main run's settings; ablated: the arm's) and a delta row "
    "(ablated − base, interval over tasks resampled once for both arms). Both arms run the same attack set; "
    "only rollouts recorded in both arms are compared, so n_attacked and n_benign are the paired counts. "
    "asr: n_success of n_attacked; task_score: the benign episodes' mean task score over n_benign; "
    "task_score_attacked: over n_attacked; wall_s_mean: mean wall seconds per episode over the n_timed "
    "attacked and benign episodes whose shard timing files hold one in both arms; n_timer_hit: episodes the "
    "arm's timer stopped."
)


def mean_wall_s(wall_s: dict[str, float]) -> Callable[[list[Rollout]], Ratio]:
    """Mean wall seconds per episode over the rollouts with a recorded time, as a ratio of sums so the
    cluster bootstrap resamples it like a rate."""

    def metric(rs: list[Rollout]) -> Ratio:
        times = [wall_s[r.rollout_id] for r in rs if r.rollout_id in wall_s]
        return Ratio(sum(times), len(times))

    return metric


ARMS = ("base", "ablated")


def _orchestrator_metrics(timed: Callable[[list[Rollout]], Ratio]):
    # (column, metric, which episodes): ASR and the attacked task score over the attacked episodes, the task
    # score over the benign ones, the mean time over both.
    return (
        ("asr", sc.asr, "attacked"),
        ("task_score", sc.task_score, "benign"),
        ("task_score_attacked", sc.task_score, "attacked"),
        ("wall_s_mean", timed, "both"),
    )


def _part(part: str, benign: list[Rollout], attacked: list[Rollout]) -> list[Rollout]:
    return {"benign": benign, "attacked": attacked, "both": attacked + benign}[part]


def _paired(base: list[Rollout], ablated: list[Rollout]) -> tuple[list[Rollout], list[Rollout]]:
    both = {r.rollout_id for r in base} & {r.rollout_id for r in ablated}
    return [r for r in base if r.rollout_id in both], [r for r in ablated if r.rollout_id in both]


def orchestrator_table(
    base: tuple[list[Rollout], list[Rollout]],
    ablated: tuple[list[Rollout], list[Rollout]],
    settings: dict[str, dict[str, Any]],
    wall_s: dict[str, dict[str, float]],
    boot: FamilyBootstrap,
) -> pd.DataFrame:
    """An orchestrator ablation (``apex.ablations[].orchestrator``): per model, the base and ablated arms'
    ASR, task score and mean episode time, and their paired difference. ``base`` and ``ablated`` are each
    (benign, attacked) rollouts; ``settings`` the orchestrator settings and ``wall_s`` the seconds per
    rollout id, per arm (``base``, ``ablated``): both arms hold the same rollout ids."""
    by_model: dict[str, dict[str, list[Rollout]]] = defaultdict(lambda: defaultdict(list))
    for arm, (benign, attacked) in (("base", base), ("ablated", ablated)):
        for r in benign:
            by_model[r.condition][f"{arm}_benign"].append(r)
        for r in attacked:
            by_model[r.condition][f"{arm}_attacked"].append(r)
    # Times are paired too: only episodes timed in both arms count in either.
    common = set(wall_s["base"]) & set(wall_s["ablated"])
    timed = {arm: mean_wall_s({k: v for k, v in wall_s[arm].items() if k in common}) for arm in ARMS}
    rows: list[dict[str, Any]] = []
    for model in sorted(by_model):
        g = by_model[model]
        benign = dict(zip(ARMS, _paired(g["base_benign"], g["ablated_benign"]), strict=True))
        attacked = dict(zip(ARMS, _paired(g["base_attacked"], g["ablated_attacked"]), strict=True))
        for arm in ARMS:
            b, a = benign[arm], attacked[arm]
            row: dict[str, Any] = {"model": model, "arm": arm, **settings[arm]}
            row |= {"n_attacked": len(a), "n_success": sum(bool(r.outcome.attack_success) for r in a)}
            row |= {"n_benign": len(b), "n_timed": int(timed[arm](a + b).den)}
            for name, metric, part in _orchestrator_metrics(timed[arm]):
                rs = _part(part, b, a)
                lo, hi = boot.interval(rs, metric) if rs else (math.nan, math.nan)
                row |= {name: _value(metric, rs), f"{name}_lo": lo, f"{name}_hi": hi}
            row["n_timer_hit"] = sum(r.outcome.timer_hit for r in a + b)
            rows.append(row)
        delta: dict[str, Any] = {"model": model, "arm": "delta"}
        delta |= {"n_attacked": len(attacked["base"]), "n_benign": len(benign["base"])}
        pairs = zip(*(_orchestrator_metrics(timed[arm]) for arm in ARMS), strict=True)
        for (name, m_base, part), (_, m_ablated, _) in pairs:
            rs = {arm: _part(part, benign[arm], attacked[arm]) for arm in ARMS}
            if rs["base"] and rs["ablated"]:
                value = m_ablated(rs["ablated"]).value - m_base(rs["base"]).value
                lo, hi = boot.delta_interval(rs["ablated"], rs["base"], m_ablated, m_base)
            else:
                value, lo, hi = math.nan, math.nan, math.nan
            delta |= {name: value, f"{name}_lo": lo, f"{name}_hi": hi}
        rows.append(delta)
    frame = pd.DataFrame(rows)
    # Counts stay integers beside the delta rows' empty cells.
    for col in ("n_success", "n_timed", "n_timer_hit"):
        frame[col] = frame[col].astype("Int64")
    return frame


# --- the stage ------------------------------------------------------------------------------------------


def write_ablation(cfg: Config, name: str, inputs: dict[str, Any], out: Path) -> dict[str, Any]:
    """Rule apex_ablation_table: ablation ``name``'s table (its arm against the main run) at ``out`` (and
    beside it), with its provenance. ``inputs``: the rule's named inputs (``base``/``ablated`` attacked
    shards, ``base_judged``/``judged`` judge files, ``base_benign``/``ablated_benign`` shards of an
    orchestrator arm, ``base_attacks``/``attacks`` attack sets, ``replays`` the ablated arm's replays)."""
    from evoaudit.hashing import sha256_file
    from evoaudit.jsonl import read_timing
    from evoaudit.provenance import write_provenance
    from evoaudit.report.apex.judged import judged_rollouts, replay_totals
    from evoaudit.report.simlabel import apex_sim_notice

    found = [a for a in cfg.apex.ablations if a.name == name]
    if not found:
        raise ValueError(f"apex.ablations: no ablation named {name!r}")
    spec, policy = found[0], cfg.apex.failure_policy
    sides = {
        "base": ("base", "base_judged", "base_benign"),
        "ablated": ("ablated", "judged", "ablated_benign"),
    }
    arms = {
        arm: judged_rollouts(inputs[shards], inputs[judged], policy, f"{arm} arm")
        for arm, (shards, judged, _) in sides.items()
    }
    if spec.orchestrator:
        # The benign shards of both arms (the task score), judged by the same judge files.
        for arm, (_, judged, benign) in sides.items():
            arms[f"{arm}_benign"] = judged_rollouts(
                inputs[benign], inputs[judged], policy, f"{arm} arm (benign)"
            )
    bs = cfg.report.bootstrap
    families = sorted({r.family for rs in arms.values() for r in rs})
    boot = FamilyBootstrap(families, bs.replicates, bs.seed if bs.seed is not None else cfg.seed, bs.level)
    if spec.orchestrator:
        # Wall times live beside each shard (its timing file), outside the hashed records; both arms hold
        # the same rollout ids, so one lookup per arm.
        wall_s = {
            arm: {
                rid: t["wall_s"]
                for p in [*inputs[shards], *inputs[benign]]
                for rid, t in read_timing(p).items()
                if "wall_s" in t
            }
            for arm, (shards, _, benign) in sides.items()
        }
        settings = {
            "base": {k: getattr(cfg.apex, k) for k in spec.orchestrator},
            "ablated": dict(spec.orchestrator),
        }
        frame = orchestrator_table(
            (arms["base_benign"], arms["base"]),
            (arms["ablated_benign"], arms["ablated"]),
            settings,
            wall_s,
            boot,
        )
    else:
        frame = ablation_table(
            arms["base"],
            arms["ablated"],
            sc.load_attacks(inputs["base_attacks"]),
            sc.load_attacks(inputs["attacks"]),
            boot,
        )
    sets = {
        "base_attack_set_sha256": sha256_file(Path(inputs["base_attacks"])),
        "ablated_attack_set_sha256": sha256_file(Path(inputs["attacks"])),
        # The ablated arm's replay (the base arm's is in the main report's apex_replay table).
        "ablated_replay": replay_totals(inputs["replays"]),
    }
    write_table(name, spec.attacks, frame, out, apex_sim_notice(cfg), sets, spec.orchestrator)
    write_provenance(
        [out, out.with_suffix(".parquet"), out.with_suffix(".html")], cfg, "apex_ablation_table", **sets
    )
    return sets
