"""Suite stage entry points: the checker audit and the sealed instance table with its spec."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.hashing import sha256_file
from evoaudit.records import Call
from evoaudit.suite import banking
from evoaudit.suite.checks import check_utility
from evoaudit.suite.instances import build_instances, write_instances


def run_checker_audit(cfg: Config, csv_path: Path, summary_path: Path) -> dict:
    """Probe every official predicate with states built through the real tools from the real fixture."""
    rows = []
    passing, failing = [], {}
    for inst in (i for i in build_instances(cfg) if i.variant == "v0"):
        pre = banking.build_environment(inst.environment_template)
        probes: dict[str, tuple[list[Call], str]] = {
            "ground_truth": (inst.ground_truth, "always applicable"),
            "no_op": ([], "always applicable: doing nothing must not satisfy a task that asks for something"),
        }
        accepted = {}
        for probe, (plan, reason) in probes.items():
            post = pre.model_copy(deep=True)
            runtime = banking.make_runtime()
            for c in plan:
                runtime.run_function(post, c.function, c.args)
            ok = check_utility(inst, inst.answer or "", pre, post)
            accepted[probe] = ok
            rows.append(
                {"family": inst.family, "probe": probe, "applicable": True, "reason": reason, "accepted": ok}
            )
        if accepted["ground_truth"] and not accepted["no_op"]:
            passing.append(inst.family)
        else:
            failing[inst.family] = "rejects_ground_truth" if not accepted["ground_truth"] else "vacuous"
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["family", "probe", "applicable", "reason", "accepted"])
        writer.writeheader()
        writer.writerows(rows)
    summary = {"failing": failing, "passing": passing}
    summary_path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def make_instances(cfg: Config, audit_summary: Path, table: Path, spec_path: Path) -> dict:
    """Write the instance table and the suite spec that records its hash (read by hash downstream)."""
    table.parent.mkdir(parents=True, exist_ok=True)
    instances = build_instances(cfg)
    records_sha = write_instances(instances, table)
    spec = {
        "suite": banking.SUITE_NAME,
        "benchmark_version": banking.BENCHMARK_VERSION,
        "checker_audit_sha256": sha256_file(audit_summary),
        "instances_sha256": sha256_file(table),
        "records_sha256": records_sha,
        "families": sorted({i.family for i in instances}),
        "split": {i.family: i.split for i in instances},
        "roles": {i.variant: i.role for i in instances},
    }
    spec_path.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    return spec


class SuiteSpecError(AuditError):
    pass


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
