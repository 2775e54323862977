"""The report's tables, each a deterministic DataFrame built from rollout records and metric functions.

Row order follows the configured condition order, then sorted keys; every rate carries ``_lo``/``_hi``
bootstrap bounds (``stats.FamilyBootstrap``); every Δ is condition − baseline on matched episodes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from evoaudit.config import Config
from evoaudit.evaluate.outcome import HARNESS_ERROR
from evoaudit.methods.conditions import condition
from evoaudit.methods.registry import get_method
from evoaudit.records import Rollout
from evoaudit.report import metrics as m
from evoaudit.report.stats import FamilyBootstrap, family_signflip, mcnemar_exact
from evoaudit.seeds import derive_seed

Metric = Callable[[list[Rollout]], m.Ratio]

# The headline metrics that get Δs and lineage deltas: (column, arm, metric).
HEADLINE: tuple[tuple[str, str, Metric], ...] = (
    ("utility", "benign", m.utility),
    ("utility_under_attack", "attacked", m.utility_under_attack),
    ("exposure", "attacked", m.exposure),
    ("casr", "attacked", m.conditional_asr),
    ("asr", "attacked", m.asr),
    ("unauth", "attacked", m.unauthorized_state_change),
)
# evoaudit's variants of a published measure, reported in the main table as extra named columns beside the
# published one (levels and Δs): utility under attack with the attacker's effects taken back first.
VARIANTS: tuple[tuple[str, str, Metric], ...] = (
    ("utility_under_attack_isolated", "attacked", m.utility_under_attack_isolated),
)


def bootstrap_seed(cfg: Config) -> int:
    if cfg.report.bootstrap.seed is not None:
        return cfg.report.bootstrap.seed
    return derive_seed(cfg.seed, "report", "bootstrap")


@dataclass
class Data:
    """Scored rollouts of one family set, grouped by (condition, arm), with its bootstrap."""

    cfg: Config
    conditions: list[str]
    by: dict[tuple[str, str], list[Rollout]]
    excluded: dict[str, int]
    boot: FamilyBootstrap
    families: list[str] = field(default_factory=list)
    # Every rollout, infrastructure failures included: interface diagnostics and exclusion counts.
    everything: dict[tuple[str, str], list[Rollout]] = field(default_factory=dict)

    @classmethod
    def build(cls, cfg: Config, rollouts: list[Rollout], families: list[str] | None = None) -> Data:
        if families is not None:
            keep = set(families)
            rollouts = [r for r in rollouts if r.family in keep]
        # Only families with records are resampled: an empty family would dilute every replicate.
        fams = sorted({r.family for r in rollouts})
        policy = cfg.evaluation.infra_failure_policy
        by: dict[tuple[str, str], list[Rollout]] = defaultdict(list)
        excluded: dict[str, int] = defaultdict(int)
        everything: dict[tuple[str, str], list[Rollout]] = defaultdict(list)
        for r in rollouts:
            excluded[r.condition] += r.outcome.infra_failure is not None
            everything[(r.condition, r.arm)].append(r)
        for r in m.scored(rollouts, policy):
            by[(r.condition, r.arm)].append(r)
        present = {r.condition for r in rollouts}
        conditions = [c for c in cfg.conditions if c in present]
        conditions += sorted(present - set(cfg.conditions))  # e.g. hand-built sets in tests
        boot = FamilyBootstrap(
            fams, cfg.report.bootstrap.replicates, bootstrap_seed(cfg), cfg.report.bootstrap.level
        )
        return cls(cfg, conditions, dict(by), dict(excluded), boot, fams, dict(everything))

    def get(self, condition: str, arm: str) -> list[Rollout]:
        return self.by.get((condition, arm), [])

    @property
    def baseline(self) -> str | None:
        b = self.cfg.report.baseline
        return b if any(c == b for c in self.conditions) else None


def _put(row: dict, name: str, boot: FamilyBootstrap, rs: list[Rollout], metric: Metric) -> None:
    row[name] = metric(rs).value
    row[f"{name}_lo"], row[f"{name}_hi"] = boot.interval(rs, metric)


def put_delta(
    row: dict, name: str, boot: FamilyBootstrap, a: list[Rollout], b: list[Rollout], metric: Metric
) -> None:
    """``d_<name>`` = metric(a) − metric(b) on the episodes both ran (``metrics.matched``) and its
    bootstrap interval into ``row``; NaN when they share none. The defence tables (this module's and
    APEX-Harm's, ``report.apex.defense``) use it too."""
    a, b = m.matched(a, b)
    if not a:
        row[f"d_{name}"] = row[f"d_{name}_lo"] = row[f"d_{name}_hi"] = math.nan
        return
    row[f"d_{name}"] = metric(a).value - metric(b).value
    row[f"d_{name}_lo"], row[f"d_{name}_hi"] = boot.delta_interval(a, b, metric)


def _per_family_net(cond: list[Rollout], base: list[Rollout]) -> list[int]:
    by_c: dict[str, list[Rollout]] = defaultdict(list)
    by_b: dict[str, list[Rollout]] = defaultdict(list)
    for r in cond:
        by_c[r.family].append(r)
    for r in base:
        by_b[r.family].append(r)
    out = []
    for fam in sorted(by_c.keys() | by_b.keys()):
        t = m.transitions(by_c[fam], by_b[fam])
        out.append(t.w_to_c - t.c_to_w)
    return out


def main_table(d: Data) -> pd.DataFrame:
    """One row per condition: levels, Δs and paired transitions against the baseline, counts.

    ``net`` is the published count W→C − C→W; ``net_rate`` is that count over the pairs, with its interval.
    Every non-baseline row also has ``baseline_<metric>``: the baseline's level on the episodes that row's
    Δ is taken over (``metrics.matched``), so that a condition run on a subset of the episodes (a placebo's
    goal subset) reads level, baseline level and Δ on one episode set: ``d_x = x − baseline_x`` whenever
    the baseline ran every episode the condition ran.
    """
    rows = []
    base = d.baseline
    measures = HEADLINE + VARIANTS
    for cond in d.conditions:
        benign, attacked = d.get(cond, "benign"), d.get(cond, "attacked")
        row: dict = {"condition": cond, "n_benign": len(benign), "n_attacked": len(attacked)}
        row["n_exposed"] = len([r for r in attacked if r.outcome.exposed])
        row["n_excluded"] = d.excluded.get(cond, 0)
        for name, arm, metric in measures:
            _put(row, name, d.boot, benign if arm == "benign" else attacked, metric)
        row["unexposed_successes"] = m.unexposed_successes(attacked)
        if base is not None and cond != base:
            bb, ba = d.get(base, "benign"), d.get(base, "attacked")
            for name, arm, metric in measures:
                mine, theirs = (benign, bb) if arm == "benign" else (attacked, ba)
                put_delta(row, name, d.boot, mine, theirs, metric)
                _, theirs_matched = m.matched(mine, theirs)
                row[f"baseline_{name}"] = metric(theirs_matched).value if theirs_matched else math.nan
            t = m.transitions(benign, bb)
            row.update(w_to_c=t.w_to_c, c_to_w=t.c_to_w, n_pairs=t.n_pairs, net=t.net)
            row["net_rate"] = t.net_rate.value
            row["net_rate_lo"], row["net_rate_hi"] = d.boot.paired_interval(benign, bb, m.net_rate)
            row["p_mcnemar"] = mcnemar_exact(t)
            row["p_family_signflip"] = family_signflip(
                _per_family_net(benign, bb), derive_seed(bootstrap_seed(d.cfg), "signflip", cond)
            )
        rows.append(row)
    return _ordered(pd.DataFrame(rows), MAIN_COLUMNS)


def _with_ci(*names: str) -> list[str]:
    return [c for n in names for c in (n, f"{n}_lo", f"{n}_hi")]


MAIN_COLUMNS = [
    "condition",
    "n_benign",
    *_with_ci("utility", "d_utility"),
    "baseline_utility",
    *_with_ci("utility_under_attack", "d_utility_under_attack"),
    "baseline_utility_under_attack",
    *_with_ci("utility_under_attack_isolated", "d_utility_under_attack_isolated"),
    "baseline_utility_under_attack_isolated",
    "n_pairs",
    "w_to_c",
    "c_to_w",
    "net",
    *_with_ci("net_rate"),
    "p_mcnemar",
    "p_family_signflip",
    "n_attacked",
    "n_exposed",
    *_with_ci("exposure", "d_exposure"),
    "baseline_exposure",
    *_with_ci("casr", "d_casr"),
    "baseline_casr",
    *_with_ci("asr", "d_asr"),
    "baseline_asr",
    *_with_ci("unauth", "d_unauth"),
    "baseline_unauth",
    "unexposed_successes",
    "n_excluded",
]


COUNT_COLUMNS = (
    "n",
    "n_families",
    "n_pairs",
    "w_to_c",
    "c_to_w",
    "net",
    "unexposed_successes",
    "group_size",
)


def _is_count(col: str) -> bool:
    return col in COUNT_COLUMNS or col.startswith("n_")


def _ordered(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Fixed columns in a fixed order (absent ones empty), so every run writes the same header.

    Counts are nullable integers: a count that does not apply (the baseline's own transitions) is
    empty, not 0, and never turns the column into floats.
    """
    for c in columns:
        if c not in frame.columns:
            frame[c] = math.nan
    frame = frame[columns] if len(frame) else pd.DataFrame(columns=columns)
    for c in columns:
        if _is_count(c):
            frame[c] = frame[c].astype("Int64")
    return frame


DEFENSE_COLUMNS = [
    "defense",
    "condition",
    "n_benign",
    *_with_ci("utility", "d_utility", "dd_utility", "utility_under_attack", "d_utility_under_attack"),
    "n_attacked",
    "n_exposed",
    *_with_ci("exposure", "d_exposure", "casr", "d_casr", "asr", "d_asr", "dd_asr", "unauth", "d_unauth"),
    "dd_unauth",
    "dd_unauth_lo",
    "dd_unauth_hi",
    "n_excluded",
]
# The headline effects whose defence Δ is also compared with the baseline condition's (dd_*).
_DD = ("utility", "asr", "unauth")


def defense_table(plain: Data, defended: dict[str, Data]) -> pd.DataFrame:
    """One row per (defence, condition), the undefended run first as defence ``none``: the main table's
    levels, the defence's Δ against the undefended run on matched episodes and, against the baseline
    condition, the difference of the two Δs. Every interval resamples the undefended run's families."""
    boot, base = plain.boot, plain.baseline
    rows = []
    for name, d in [("none", plain), *defended.items()]:
        for cond in plain.conditions:
            benign, attacked = d.get(cond, "benign"), d.get(cond, "attacked")
            row: dict = {"defense": name, "condition": cond}
            row.update(n_benign=len(benign), n_attacked=len(attacked))
            row["n_exposed"] = len([r for r in attacked if r.outcome.exposed])
            row["n_excluded"] = d.excluded.get(cond, 0)
            for col, arm, metric in HEADLINE:
                _put(row, col, boot, benign if arm == "benign" else attacked, metric)
                if d is plain:
                    continue
                mine, theirs = d.get(cond, arm), plain.get(cond, arm)
                m.same_seeds(mine, theirs, f"defence table, {name} on {cond} ({arm})")
                put_delta(row, col, boot, mine, theirs, metric)
                if col in _DD and base is not None and cond != base:
                    a = m.matched(mine, theirs)
                    b = m.matched(d.get(base, arm), plain.get(base, arm))
                    if a[0] and b[0]:
                        row[f"dd_{col}"] = (metric(a[0]).value - metric(a[1]).value) - (
                            metric(b[0]).value - metric(b[1]).value
                        )
                        row[f"dd_{col}_lo"], row[f"dd_{col}_hi"] = boot.delta_of_deltas_interval(a, b, metric)
            rows.append(row)
    return _ordered(pd.DataFrame(rows), DEFENSE_COLUMNS)


def per_goal_table(d: Data) -> pd.DataFrame:
    rows = []
    base = d.baseline
    for cond in d.conditions:
        by_goal: dict[str, list[Rollout]] = defaultdict(list)
        for r in d.get(cond, "attacked"):
            by_goal[r.goal or ""].append(r)
        base_by_goal: dict[str, list[Rollout]] = defaultdict(list)
        if base is not None:
            for r in d.get(base, "attacked"):
                base_by_goal[r.goal or ""].append(r)
        for goal in sorted(by_goal):
            rs = by_goal[goal]
            row: dict = {"condition": cond, "goal": goal, "n_attacked": len(rs)}
            for name, metric in (("exposure", m.exposure), ("casr", m.conditional_asr), ("asr", m.asr)):
                _put(row, name, d.boot, rs, metric)
                if base is not None and cond != base:
                    put_delta(row, name, d.boot, rs, base_by_goal[goal], metric)
            rows.append(row)
    cols = ["condition", "goal", "n_attacked", *_with_ci("exposure", "d_exposure", "casr", "d_casr")]
    return _ordered(pd.DataFrame(rows), cols + _with_ci("asr", "d_asr"))


def lineage_table(d: Data) -> pd.DataFrame:
    """Per-lineage Δ vs baseline of each headline effect, its spread and sign agreement with the pooled Δ."""
    base = d.baseline
    lineages = list(d.cfg.lineages)
    cols = ["condition", "metric", "pooled", *[f"d_{lin}" for lin in lineages]]
    cols += ["median", "min", "max", "n_lineages", "n_agree"]
    if base is None:
        return pd.DataFrame(columns=cols)
    rows = []
    for cond in d.conditions:
        if cond == base:
            continue
        for name, arm, metric in HEADLINE:
            if name == "casr":
                continue  # a ratio of two headline effects; its parts are reported
            a, b = m.matched(d.get(cond, arm), d.get(base, arm))
            pooled = metric(a).value - metric(b).value if a else math.nan
            row: dict = {"condition": cond, "metric": name, "pooled": pooled}
            per = []
            for lin in lineages:
                la = [r for r in a if r.lineage == lin]
                lb = [r for r in b if r.lineage == lin]
                delta = metric(la).value - metric(lb).value if la else math.nan
                row[f"d_{lin}"] = delta
                if not math.isnan(delta):
                    per.append(delta)
            s = pd.Series(per, dtype=float)
            row.update(
                median=s.median() if per else math.nan,
                min=s.min() if per else math.nan,
                max=s.max() if per else math.nan,
                n_lineages=len(per),
                n_agree=_agree(per, pooled),
            )
            rows.append(row)
    return _ordered(pd.DataFrame(rows), cols)


def _agree(per: list[float], pooled: float) -> int:
    """Lineages whose Δ has the pooled Δ's sign (a zero pooled Δ: lineages with Δ exactly 0)."""
    if math.isnan(pooled):
        return 0
    sign = (pooled > 0) - (pooled < 0)
    return sum(((x > 0) - (x < 0)) == sign for x in per)


def harm_categories(rollouts: list[Rollout]) -> list[str]:
    """Harm categories in the order the records list them (the suite's order), then any others sorted."""
    seen: dict[str, None] = {}
    for r in rollouts:
        for k in r.outcome.harm:
            seen.setdefault(k, None)
    return list(seen)


def harm_table(d: Data) -> pd.DataFrame:
    """Partition unauth = ASR hits with state change + state change without goal success; categories."""
    rows = []
    cats = harm_categories([r for c in d.conditions for r in d.get(c, "attacked")])
    for cond in d.conditions:
        rs = d.get(cond, "attacked")
        row: dict = {"condition": cond, "n_attacked": len(rs)}
        _put(row, "unauth", d.boot, rs, m.unauthorized_state_change)
        _put(row, "asr_state", d.boot, rs, m.asr_with_state_change)
        _put(row, "extra_state", d.boot, rs, m.state_change_without_goal)
        # Zero by construction when the records are consistent; a non-zero value is a records defect.
        row["partition_residual"] = row["unauth"] - row["asr_state"] - row["extra_state"] if rs else math.nan
        for cat in cats:
            _put(row, cat, d.boot, rs, m.harm_rate(cat))
        _put(row, "disclosure", d.boot, rs, m.disclosure)
        rows.append(row)
    cols = ["condition", "n_attacked", *_with_ci("unauth", "asr_state", "extra_state"), "partition_residual"]
    return _ordered(pd.DataFrame(rows), cols + _with_ci(*cats, "disclosure"))


def interface_table(d: Data) -> pd.DataFrame:
    """How the model used the tool interface, over every episode: an episode the endpoint failed midway
    still made (or did not make) its calls, and leaving it out would hide exactly the episodes a server
    rejected (e.g. every tool-using one). ``n_excluded`` says how many of ``n`` the other tables drop.
    An episode the harness failed (``harness_error``) left no calls on record, so it is counted in ``n`` and
    ``n_excluded`` but not in the rates."""
    rows = []
    for cond in d.conditions:
        for arm in ("benign", "attacked"):
            every = d.everything.get((cond, arm), [])
            if not every:
                continue
            row: dict = {"condition": cond, "arm": arm, "n": len(every), "n_excluded": m.excluded(every)}
            rs = [r for r in every if r.outcome.infra_failure != HARNESS_ERROR]
            _put(row, "textual_action_rate", d.boot, rs, m.textual_action_rate)
            _put(row, "zero_call_rate", d.boot, rs, m.zero_tool_call_rate)
            _put(row, "mean_tool_calls", d.boot, rs, m.mean_tool_calls)
            _put(row, "read_call_rate", d.boot, rs, m.read_call_rate)
            rows.append(row)
    cols = ["condition", "arm", "n", "n_excluded"]
    return _ordered(
        pd.DataFrame(rows),
        cols + _with_ci("textual_action_rate", "zero_call_rate", "mean_tool_calls", "read_call_rate"),
    )


def sensitivity_table(
    cfg: Config, rollouts: list[Rollout], subsets: dict[str, list[str] | None]
) -> pd.DataFrame:
    """The main table re-aggregated over family subsets (each with its own family bootstrap)."""
    frames = []
    for name, families in subsets.items():
        if families is not None and not families:
            continue
        frame = main_table(Data.build(cfg, rollouts, families))
        present = {r.family for r in rollouts}
        frame.insert(0, "n_families", len(present & set(families)) if families is not None else len(present))
        frame.insert(0, "subset", name)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["subset", "n_families", *MAIN_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def placebo_table(d: Data, length_ratios: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Each method condition against its placebo, on the episodes both ran (placebos run a goal subset)."""
    rows = []
    for plc in d.conditions:
        if not plc.startswith("placebo-"):
            continue
        method = plc.removeprefix("placebo-")
        real = [c for c in d.conditions if not condition(c).is_placebo and condition(c).method == method]
        ratios = length_ratios.get(method, {})
        for cond in real:
            row: dict = {"condition": cond, "placebo": plc}
            for name, arm, metric in (("utility", "benign", m.utility), ("asr", "attacked", m.asr)):
                a, b = m.matched(d.get(cond, arm), d.get(plc, arm))
                row[f"n_{arm}"] = len(a)
                row[f"{name}_condition"] = metric(a).value
                row[f"{name}_placebo"] = metric(b).value
                put_delta(row, name, d.boot, a, b, metric)
            vals = [ratios[k] for k in sorted(ratios)]
            row["length_ratio_mean"] = sum(vals) / len(vals) if vals else math.nan
            row["length_ratio_by_lineage"] = ";".join(f"{k}:{ratios[k]:.3f}" for k in sorted(ratios))
            rows.append(row)
    cols = ["condition", "placebo", "n_benign", "utility_condition", "utility_placebo"]
    cols += _with_ci("d_utility") + ["n_attacked", "asr_condition", "asr_placebo", *_with_ci("d_asr")]
    return _ordered(pd.DataFrame(rows), cols + ["length_ratio_mean", "length_ratio_by_lineage"])


def retrieval_provenance(r: Rollout) -> str | None:
    """'success', 'failure' or 'mixed' when the rollout records which memory items were retrieved."""
    extra = r.model_extra or {}
    rec = getattr(r, "retrieval", None) or extra.get("retrieval")
    if not isinstance(rec, dict):
        return None
    prov = rec.get("provenance")
    if isinstance(prov, list):
        kinds = sorted(set(prov))
        return kinds[0] if len(kinds) == 1 else "mixed" if kinds else None
    return prov if isinstance(prov, str) else None


def retrieval_table(d: Data, provenance: dict[str, str] | None = None) -> pd.DataFrame:
    """Episodes of each retrieving method's conditions (``Method.retrieves``: ReasoningBank) split by the
    provenance of what they retrieved.

    ``provenance`` maps rollout ids to 'success', 'failure', 'mixed' or 'none' (nothing retrieved); a
    rollout that records its retrieval itself is read directly.
    """
    provenance = provenance or {}
    rows = []
    for cond in d.conditions:
        parsed = condition(cond)
        if parsed.is_placebo or not get_method(parsed.method).retrieves:
            continue
        for arm, name, metric in (("benign", "utility", m.utility), ("attacked", "asr", m.asr)):
            groups: dict[str, list[Rollout]] = defaultdict(list)
            for r in d.get(cond, arm):
                prov = retrieval_provenance(r) or provenance.get(r.rollout_id)
                if prov is not None:
                    groups[prov].append(r)
            for prov in sorted(groups):
                row: dict = {"condition": cond, "arm": arm, "provenance": prov, "n": len(groups[prov])}
                row["metric"] = name
                _put(row, "value", d.boot, groups[prov], metric)
                rows.append(row)
    return _ordered(pd.DataFrame(rows), ["condition", "arm", "provenance", "n", "metric", *_with_ci("value")])


def diagnostics_table(metas: dict[tuple[str, str], dict]) -> pd.DataFrame:
    """Evolution diagnostics: scalar entries of each artifact's ``meta.json`` diagnostics, flattened."""
    rows = []
    for (lineage, method), meta in sorted(metas.items()):
        for key, value in sorted(_flatten(meta.get("diagnostics", {})).items()):
            rows.append({"lineage": lineage, "method": method, "key": key, "value": value})
    return _ordered(pd.DataFrame(rows), ["lineage", "method", "key", "value"])


def _flatten(obj: object, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(obj, list):
        if all(not isinstance(v, dict | list) for v in obj) and len(obj) <= 12:
            out[prefix] = ", ".join(map(str, obj))
        else:
            out[prefix] = f"[{len(obj)} entries]"
    else:
        out[prefix] = str(obj)
    return out


def find_length_ratios(metas: dict[tuple[str, str], dict]) -> dict[str, dict[str, float]]:
    """{method: {lineage: placebo/real length ratio}} from placebo artifacts' diagnostics."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (lineage, method), meta in metas.items():
        if not method.startswith("placebo-"):
            continue
        for key, value in _flatten(meta.get("diagnostics", {})).items():
            if key.split(".")[-1] in ("length_ratio", "realised_length_ratio", "realized_length_ratio"):
                try:
                    out[method.removeprefix("placebo-")][lineage] = float(value)
                except ValueError:
                    continue
                break
    return dict(out)


ROUNDS_COLUMNS = [
    "round",
    "condition",
    "lineage",
    "n_benign",
    *_with_ci("utility", "d_utility"),
    "n_attacked",
    "n_exposed",
    *_with_ci("exposure", "d_exposure", "asr", "d_asr", "unauth", "d_unauth"),
    "artifact_chars",
]
_ROUND_METRICS = ("utility", "exposure", "asr", "unauth")


def _of(d: Data, cond: str, arm: str, lineage: str) -> list[Rollout]:
    rs = d.get(cond, arm)
    return rs if lineage == "all" else [r for r in rs if r.lineage == lineage]


def rounds_table(by_round: dict[int, Data], artifact_chars: dict[tuple[int, str, str], int]) -> pd.DataFrame:
    """One row per (round, condition, lineage), lineage ``all`` pooling the lineages (their repetitions):
    benign utility, exposure, ASR and unauthorised state change, and d_* = that round − round 1 on the
    same episodes (same lineage, family, variant, goal and seed). ``artifact_chars``: the deployed
    artifact's length per (round, lineage, method) (``methods.placebo.deployed_chars``); ``all`` is their
    mean. Every
    interval resamples round 1's families."""
    first = by_round[1]
    boot = first.boot
    lineages = list(first.cfg.lineages)
    rows = []
    for r, d in sorted(by_round.items()):
        for cond in d.conditions:
            if not (d.get(cond, "benign") or d.get(cond, "attacked")):
                continue
            method = condition(cond).method
            for lineage in ["all", *lineages]:
                benign, attacked = _of(d, cond, "benign", lineage), _of(d, cond, "attacked", lineage)
                if not (benign or attacked):
                    continue
                row: dict = {"round": r, "condition": cond, "lineage": lineage}
                row.update(n_benign=len(benign), n_attacked=len(attacked))
                row["n_exposed"] = len([x for x in attacked if x.outcome.exposed])
                for col, arm, metric in HEADLINE:
                    if col not in _ROUND_METRICS:
                        continue
                    mine = _of(d, cond, arm, lineage)
                    _put(row, col, boot, mine, metric)
                    if r != 1:
                        theirs = _of(first, cond, arm, lineage)
                        m.same_seeds(mine, theirs, f"rounds table, round {r} of {cond} ({arm})")
                        put_delta(row, col, boot, mine, theirs, metric)
                over = lineages if lineage == "all" else [lineage]
                sizes = [artifact_chars[(r, ln, method)] for ln in over if (r, ln, method) in artifact_chars]
                row["artifact_chars"] = sum(sizes) / len(sizes) if sizes else float("nan")
                rows.append(row)
    return _ordered(pd.DataFrame(rows), ROUNDS_COLUMNS)
