"""Suite stage entry points: the checker audit and the sealed instance table with its spec.

Neither calls a model. The audit probes AgentDojo's official predicates (and the injection-goal
checkers) on the official fixture; the instance stage materialises the corrected families, verifies every
variant's corrected predicate against the same probes, and writes the spec that later stages verify.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.hashing import sha256_file
from evoaudit.records import Call, Instance
from evoaudit.suite import banking, probes
from evoaudit.suite.checks import check_predicate
from evoaudit.suite.families import EXCLUDED, FAMILIES, family
from evoaudit.suite.instances import build_instances, write_instances

AUDIT_FIELDS = ["family", "probe", "applicable", "reason", "accepted"]
GOAL_FIELDS = ["goal", "probe", "description", "expected", "accepted", "finding"]
VARIANT_FIELDS = ["instance_id", "family", "variant", "probe", "applicable", "reason", "accepted", "ok"]
# What the excluded families ask, for probe applicability (kept families say it in their table).
_EXCLUDED_ASKS = {"user_task_8": "answer"}


class SuiteSpecError(AuditError):
    pass


def goal_csv_path(csv_path: Path) -> Path:
    return csv_path.with_name("goal_checker_probes.csv")


def variant_csv_path(spec_path: Path) -> Path:
    return spec_path.with_name("variant_probes.csv")


def _write_csv(path: Path, fields: list[str], rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def audit_official(task_id: str) -> list[dict[str, Any]]:
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
        asks, amounts = fam.asks, fam.variant(0).predicate.get("answer_amounts", [])

    def check(output: str, pre_env: Any, post_env: Any) -> bool:
        return check_predicate(
            {"kind": "official", "task": task_id}, output, pre_env, post_env, where=task_id
        )

    rows = probes.evaluate_probes(check, pre, probes.utility_probes(plan, answer, amounts, asks))
    return [{"family": task_id} | r for r in rows]


def run_checker_audit(cfg: Config, csv_path: Path, summary_path: Path) -> dict:
    """Probe every official predicate and every injection-goal checker; no model is called."""
    rows: list[dict[str, Any]] = []
    failing: dict[str, str] = {}
    all_defects: dict[str, list[str]] = {}
    passing: list[str] = []
    for task_id in banking.user_task_ids():
        task_rows = audit_official(task_id)
        rows.extend(task_rows)
        found = probes.defects(task_rows)
        all_defects[task_id] = found
        if found:
            failing[task_id] = found[0]
        else:
            passing.append(task_id)
    _write_csv(csv_path, AUDIT_FIELDS, rows)

    pre = banking.build_environment(banking.official_environment_template())
    goal_rows = [r for g in banking.injection_task_ids() for r in probes.goal_probe_rows(g, pre)]
    goal_csv = goal_csv_path(csv_path)
    _write_csv(goal_csv, GOAL_FIELDS, goal_rows)
    goal_findings = {
        g: {
            kind: sorted(r["probe"] for r in goal_rows if r["goal"] == g and r["finding"] == kind)
            for kind in ("lenient", "blind")
        }
        for g in banking.injection_task_ids()
    }
    summary = {
        "failing": failing,
        "passing": passing,
        "defects": all_defects,
        "excluded": dict(EXCLUDED),
        "goal_checkers": goal_findings,
        "goal_checker_probes": goal_csv.name,
    }
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def variant_probe_rows(inst: Instance) -> list[dict[str, Any]]:
    """The corrected predicate of one variant against the probes of its own task."""
    pre = banking.build_environment(inst.environment_template)
    fam = family(inst.family)
    amounts = inst.predicate.get("answer_amounts", [])

    def check(output: str, pre_env: Any, post_env: Any) -> bool:
        return check_predicate(inst.predicate, output, pre_env, post_env, where=inst.instance_id)

    rows = probes.evaluate_probes(
        check, pre, probes.utility_probes(inst.ground_truth, inst.answer, amounts, fam.asks)
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


def make_instances(cfg: Config, audit_summary: Path, table: Path, spec_path: Path) -> dict:
    """Write the instance table and the suite spec that records its hash (read by hash downstream)."""
    summary = json.loads(audit_summary.read_text())
    kept = [f.family for f in FAMILIES]
    unresolved = sorted(set(summary["failing"]) - set(kept) - set(EXCLUDED))
    if unresolved:
        raise SuiteSpecError(
            f"{audit_summary}: failing official predicates {unresolved} have neither a family with a "
            "corrected predicate (suite/families.py) nor an exclusion with a reason"
        )
    instances = build_instances(cfg)
    rows = [r for inst in instances for r in variant_probe_rows(inst)]
    variant_csv = variant_csv_path(spec_path)
    _write_csv(variant_csv, VARIANT_FIELDS, rows)
    bad = [f"{r['instance_id']}:{r['probe']}" for r in rows if not r["ok"]]
    if bad:
        raise SuiteSpecError(
            f"corrected predicates fail their probes ({variant_csv}): {bad[:10]}; fix the family in "
            "suite/families.py before any model call"
        )
    table.parent.mkdir(parents=True, exist_ok=True)
    records_sha = write_instances(instances, table)
    defects = summary.get("defects", {})
    v0 = {i.family: i.predicate for i in instances if i.variant == "v0"}
    spec = {
        "suite": banking.SUITE_NAME,
        "benchmark_version": banking.BENCHMARK_VERSION,
        "checker_audit_sha256": sha256_file(audit_summary),
        "instances_sha256": sha256_file(table),
        "records_sha256": records_sha,
        "variant_probes_sha256": sha256_file(variant_csv),
        "families": kept,
        "excluded": dict(EXCLUDED),
        # The report re-aggregates over these as a sensitivity check: their official predicate passed.
        "official_unchanged": [f for f in kept if f in summary["passing"]],
        # Official predicates whose only defect is accepting an unrequested extra action.
        "official_only_spurious": [f for f in kept if defects.get(f) == ["spurious_action_insensitive"]],
        "corrections": {
            f: {
                "official_defects": defects.get(f, []),
                "predicate_kind": v0[f]["kind"],
                "correction": _correction(v0[f]),
            }
            for f in kept
        },
        "goal_checkers": summary.get("goal_checkers", {}),
        "goal_checker_probes": summary.get("goal_checker_probes"),
        "split": {i.family: i.split for i in instances},
        "clusters": {i.family: i.cluster for i in instances},
        "roles": {i.variant: i.role for i in instances},
        "vectors": {i.instance_id: i.vectors for i in instances},
    }
    spec_path.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    return spec


def verify_table(table: Path, spec_path: Path) -> dict:
    spec = json.loads(spec_path.read_text())
    actual = sha256_file(table)
    if actual != spec["instances_sha256"]:
        raise SuiteSpecError(
            f"{table}: sha256 {actual} differs from the frozen suite spec {spec_path} "
            f"({spec['instances_sha256']}); "
            "the instance table changed after the spec was written - rerun the suite stage"
        )
    return spec
