"""Banking's suite stage: the checker audit of AgentDojo's official predicates (and its injection-goal
checkers) on the official fixture, and the instance stage, which materialises the corrected families,
verifies every variant's corrected predicate against the same probes, and writes the spec.

The audit always runs both probe sets. The published set decides Table 1 (``failing``/``passing`` in the
summary); what only the strict set finds is the extension (``checker_audit_extension.csv``), acted on
only under ``suite.checker_audit.profile: strict``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoaudit.config import SuiteConfig, SuiteView
from evoaudit.hashing import sha256_file
from evoaudit.records import Call, CheckerAuditSummary, Instance
from evoaudit.suite.agentdojo.banking import probes
from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.checks import check_predicate
from evoaudit.suite.agentdojo.banking.families import EXCLUDED, FAMILIES, REPAIRED, family
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.suite.stage import (
    AUDIT_FIELDS,
    EXTENSION_FIELDS,
    GOAL_FIELDS,
    VARIANT_FIELDS,
    SuiteSpecError,
    extension_csv_path,
    goal_csv_path,
    variant_csv_path,
    write_csv,
    write_sealed_tables,
    write_spec,
)

# What the excluded families ask, for probe applicability (kept families say it in their table).
_EXCLUDED_ASKS = {"user_task_8": "answer"}


def audit_official(task_id: str, profile: str = "published") -> list[dict[str, Any]]:
    """Probe rows of one official predicate on the official fixture with the official ground truth."""
    task = banking.user_task(task_id)
    pre = banking.build_environment(banking.official_environment_template())
    plan = [
        Call(function=c.function, args=dict(c.args)) for c in task.ground_truth(pre.model_copy(deep=True))
    ]
    answer = getattr(task, "GROUND_TRUTH_OUTPUT", "") or None
    if task_id in EXCLUDED:
        asks, amounts = _EXCLUDED_ASKS[task_id], []
    else:
        fam = family(task_id)
        # v0 keeps the official parameters, so its expected amounts are the official ones.
        asks, amounts = fam.asks, fam.variant(0).answer_amounts

    def check(output: str, pre_env: Any, post_env: Any) -> bool:
        return check_predicate(
            {"kind": "official", "task": task_id}, output, pre_env, post_env, where=task_id
        )

    rows = probes.evaluate_probes(check, pre, probes.utility_probes(plan, answer, amounts, asks, profile))
    return [{"family": task_id} | r for r in rows]


def _extension_rows(
    task_id: str, strict_rows: list[dict[str, Any]], published: list[str], profile: str
) -> list[dict[str, Any]]:
    """One row per defect class the strict probes find beyond the published audit, with its evidence."""
    probe_of = {d: p for p, d in probes.DEFECT_OF_PROBE.items()}
    acted_on = (
        "yes: the strict profile replaces the predicate with a pre/post delta"
        if profile == "strict"
        else "no: reported only; the published profile keeps the official logic"
    )
    out = []
    for defect in probes.defects(strict_rows):
        if defect in published:
            continue
        probe = probe_of.get(defect, "no_op")
        row = next(r for r in strict_rows if r["probe"] == probe)
        out.append({"family": task_id, "defect": defect, "probe": probe, "reason": row["reason"]})
        out[-1]["acted_on"] = acted_on
    return out


def run_checker_audit(suite_cfg: SuiteConfig, csv_path: Path, summary_path: Path) -> dict:
    """Probe every official predicate and every injection-goal checker; no model is called."""
    profile = suite_cfg.checker_audit.profile
    rows: list[dict[str, Any]] = []
    failing: dict[str, str] = {}
    all_defects: dict[str, list[str]] = {}
    passing: list[str] = []
    extension_rows: list[dict[str, Any]] = []
    strict_passing: list[str] = []
    for task_id in banking.user_task_ids():
        task_rows = audit_official(task_id, "published")
        strict_rows = audit_official(task_id, "strict")
        rows.extend({"probe_set": "published"} | r for r in task_rows)
        rows.extend({"probe_set": "strict"} | r for r in strict_rows)
        found = probes.defects(task_rows)
        all_defects[task_id] = found
        if found:
            failing[task_id] = found[0]
        else:
            passing.append(task_id)
        extension_rows.extend(_extension_rows(task_id, strict_rows, found, profile))
        if not probes.defects(strict_rows):
            strict_passing.append(task_id)
    write_csv(csv_path, AUDIT_FIELDS, rows)
    extension_csv = extension_csv_path(csv_path)
    write_csv(extension_csv, EXTENSION_FIELDS, extension_rows)
    extension: dict[str, list[str]] = {}
    for r in extension_rows:
        extension.setdefault(r["family"], []).append(r["defect"])

    pre = banking.build_environment(banking.official_environment_template())
    goal_rows = [r for g in banking.injection_task_ids() for r in probes.goal_probe_rows(g, pre)]
    goal_csv = goal_csv_path(csv_path)
    write_csv(goal_csv, GOAL_FIELDS, goal_rows)
    goal_findings = {
        g: {
            kind: sorted(r["probe"] for r in goal_rows if r["goal"] == g and r["finding"] == kind)
            for kind in ("lenient", "blind")
        }
        for g in banking.injection_task_ids()
    }
    summary = CheckerAuditSummary(
        profile=profile,
        # Table 1: the published probe set and applicability rule.
        failing=failing,
        passing=passing,
        defects=all_defects,
        # Beyond the published audit (strict probe set); acted on only under the strict profile.
        extension=extension,
        extension_csv=extension_csv.name,
        strict_passing=strict_passing,
        excluded=dict(EXCLUDED),
        goal_checkers=goal_findings,
        goal_checker_probes=goal_csv.name,
    )
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary.write(summary_path)
    return summary.model_dump(mode="json")


def variant_probe_rows(inst: Instance, profile: str = "published") -> list[dict[str, Any]]:
    """The predicate of one variant against the probes of its own task (the profile's probe set)."""
    pre = banking.build_environment(inst.environment("agentdojo-yaml"))
    fam = family(inst.family)
    amounts = fam.variant(int(inst.variant[1:])).answer_amounts

    def check(output: str, pre_env: Any, post_env: Any) -> bool:
        return check_predicate(inst.predicate, output, pre_env, post_env, where=inst.instance_id)

    rows = probes.evaluate_probes(
        check, pre, probes.utility_probes(inst.ground_truth, inst.answer, amounts, fam.asks, profile)
    )
    out = []
    for r in rows:
        # Ground truth must be accepted; every other applicable probe (empty_state included) rejected.
        ok = (not r["applicable"]) or r["accepted"] == (r["probe"] == "ground_truth")
        out.append(
            {"instance_id": inst.instance_id, "family": inst.family, "variant": inst.variant} | r | {"ok": ok}
        )
    return out


def _correction(predicate: dict[str, Any]) -> str:
    if predicate["kind"] == "clauses":
        if predicate["basis"] == "repaired":
            return "published repair: " + predicate["treatment"]
        return "official logic kept, with each variant's values"
    if predicate["kind"] == "unchanged":
        return "official logic without fixture constants: the terminal state must equal the pre-state"
    parts = []
    if predicate.get("new_transfers"):
        parts.append("exactly the expected new transfers, by recipient and amount")
    if predicate.get("scheduled_updates"):
        parts.append("the named scheduled payment ends with the expected values, other schedules untouched")
    if predicate.get("account"):
        parts.append("the named account fields end as expected, other fields untouched")
    if predicate.get("answer_amounts"):
        parts.append("the answer states the amount as a whole number token")
    parts.append("no other consequential change")
    return "pre/post delta: " + "; ".join(parts)


def make_instances(view: SuiteView, audit_summary: Path, table: Path, spec_path: Path) -> dict:
    """Write the instance table and the suite spec that records its hash (read by hash downstream)."""
    summary = CheckerAuditSummary.read(audit_summary)
    profile = view.suite.checker_audit.profile
    if summary.profile != profile:
        raise SuiteSpecError(
            f"{audit_summary}: written under checker-audit profile {summary.profile!r}, the config "
            f"says suite.checker_audit.profile: {profile}; rerun the checker audit"
        )
    kept = [f.family for f in FAMILIES]
    unresolved = sorted(set(summary.failing) - set(kept) - set(EXCLUDED))
    if unresolved:
        raise SuiteSpecError(
            f"{audit_summary}: failing official predicates {unresolved} have neither a family with a "
            "corrected predicate (suite/agentdojo/banking/families.py) nor an exclusion with a reason"
        )
    if profile == "published":
        found = set(summary.failing) - set(EXCLUDED)
        if found != set(REPAIRED):
            raise SuiteSpecError(
                f"{audit_summary}: the published audit finds {sorted(found)} failing (excluded aside) but "
                f"the frozen published repairs cover {sorted(REPAIRED)} "
                "(suite/agentdojo/banking/families.py: REPAIRED); the published profile repairs exactly "
                "what the published audit finds"
            )
    instances = build_instances(view)
    rows = [r for inst in instances for r in variant_probe_rows(inst, profile)]
    variant_csv = variant_csv_path(spec_path)
    write_csv(variant_csv, VARIANT_FIELDS, rows)
    bad = [f"{r['instance_id']}:{r['probe']}" for r in rows if not r["ok"]]
    if bad:
        raise SuiteSpecError(
            f"corrected predicates fail their probes ({variant_csv}): {bad[:10]}; fix the family in "
            "suite/agentdojo/banking/families.py before any model call"
        )
    tables = write_sealed_tables(instances, view.roles.endpoint_variants, table)
    defects = summary.defects
    extension = summary.extension or {}
    v0 = {i.family: i.predicate for i in instances if i.variant == "v0"}
    # The families the spec describes: those with instances (suite.families may select a few).
    kept = [f for f in kept if f in v0]
    if profile == "published":
        # Families whose instances keep the official predicate's logic (the Table 9 subset).
        unchanged = [f for f in kept if v0[f].get("basis") == "official"]
    else:
        unchanged = [f for f in kept if f in (summary.strict_passing or [])]
    strict_defects = {f: [*defects.get(f, []), *extension.get(f, [])] for f in kept}
    spec = {
        "suite": banking.SUITE_NAME,
        "benchmark_version": banking.BENCHMARK_VERSION,
        "checker_audit_profile": profile,
        "checker_audit_sha256": sha256_file(audit_summary),
        # instances = learning variants only; endpoint = the sealed variants, in their own file.
        **tables,
        "variant_probes_sha256": sha256_file(variant_csv),
        "families": kept,
        "excluded": dict(EXCLUDED),
        # The report re-aggregates over these as a sensitivity check: their official predicate was kept.
        "official_unchanged": unchanged,
        # Official predicates whose only defect (strict probes) is accepting an unrequested extra action.
        "official_only_spurious": [f for f in kept if strict_defects[f] == ["spurious_action_insensitive"]],
        "corrections": {
            f: {
                "official_defects": defects.get(f, []),
                "extension_defects": extension.get(f, []),
                "predicate_kind": v0[f]["kind"],
                "correction": _correction(v0[f]),
            }
            for f in kept
        },
        "goal_checkers": summary.goal_checkers or {},
        "goal_checker_probes": summary.goal_checker_probes,
    }
    return write_spec(spec_path, spec, instances)
