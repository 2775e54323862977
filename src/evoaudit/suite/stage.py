"""The suite stage's shared half: where its files live, the sealed instance tables and the suite spec
that later stages verify, and the two entry points (the checker audit and the instance stage), which go
through the door to the configured suite (``AuditSuite.checker_audit``, ``AuditSuite.make_instances``).
Neither calls a model."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

from evoaudit.config import Config, suite_view
from evoaudit.errors import AuditError
from evoaudit.hashing import sha256_file
from evoaudit.records import Instance, SuiteSpec
from evoaudit.suite.instances import write_instances

AUDIT_FIELDS = ["probe_set", "family", "probe", "applicable", "reason", "accepted"]
EXTENSION_FIELDS = ["family", "defect", "probe", "reason", "acted_on"]
GOAL_FIELDS = ["goal", "probe", "description", "expected", "accepted", "finding"]
VARIANT_FIELDS = ["instance_id", "family", "variant", "probe", "applicable", "reason", "accepted", "ok"]

log = logging.getLogger(__name__)


class SuiteSpecError(AuditError):
    pass


def goal_csv_path(csv_path: Path) -> Path:
    return csv_path.with_name("goal_checker_probes.csv")


def extension_csv_path(csv_path: Path) -> Path:
    return csv_path.with_name("checker_audit_extension.csv")


def variant_csv_path(spec_path: Path) -> Path:
    return spec_path.with_name("variant_probes.csv")


def endpoint_table_path(table: Path) -> Path:
    """The sealed endpoint variants, beside the learning table; only code past unseal reads it."""
    return table.with_name("endpoint.parquet")


def write_csv(path: Path, fields: list[str], rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_sealed_tables(
    instances: list[Instance], endpoint_variants: tuple[str, ...], table: Path
) -> dict[str, Any]:
    """Learning variants to ``table``, endpoint variants to ``endpoint_table_path(table)``; returns the
    spec fields that commit both by sha256.

    The seal is physical: rules before unseal get a file without endpoint variants, and a change of the
    endpoint file after this stage is detected wherever it is loaded (``seal.guard``)."""
    table.parent.mkdir(parents=True, exist_ok=True)
    endpoint_table = endpoint_table_path(table)
    records_sha = write_instances([i for i in instances if i.variant not in endpoint_variants], table)
    endpoint_records_sha = write_instances(
        [i for i in instances if i.variant in endpoint_variants], endpoint_table, sealed=True
    )
    return {
        "instances_sha256": sha256_file(table),
        "records_sha256": records_sha,
        "endpoint_table": endpoint_table.name,
        "endpoint_sha256": sha256_file(endpoint_table),
        "endpoint_records_sha256": endpoint_records_sha,
        "endpoint_variants": list(endpoint_variants),
    }


def write_spec(spec_path: Path, spec: dict[str, Any], instances: list[Instance]) -> dict[str, Any]:
    """Complete a suite spec with what every suite's instances fix (split, clusters, roles, vectors) and
    write it; the spec pins the tables by sha256, so stages after it can verify what they read."""
    spec = {
        **spec,
        "split": {i.family: i.split for i in instances},
        "clusters": {i.family: i.cluster for i in instances},
        "roles": {i.variant: i.role for i in instances},
        "vectors": {i.instance_id: i.vectors for i in instances},
    }
    record = SuiteSpec.model_validate(spec)
    record.write(spec_path)
    log.info(
        "%s instance table sha256 %s, sealed endpoint file sha256 %s",
        spec["suite"],
        spec["instances_sha256"],
        spec["endpoint_sha256"],
    )
    return record.model_dump(mode="json")


def verify_table(table: Path, spec_path: Path) -> SuiteSpec:
    spec = SuiteSpec.read(spec_path)
    actual = sha256_file(table)
    if actual != spec.instances_sha256:
        raise SuiteSpecError(
            f"{table}: sha256 {actual} differs from the frozen suite spec {spec_path} "
            f"({spec.instances_sha256}); "
            "the instance table changed after the spec was written - rerun the suite stage"
        )
    return spec


def run_checker_audit(cfg: Config, csv_path: Path, summary_path: Path) -> dict:
    """The configured suite's checker audit (rule checker_audit): its summary, also written to
    ``summary_path``; no model is called."""
    from evoaudit.suite.registry import get_suite

    return get_suite(cfg.suite.name).checker_audit(cfg.suite, csv_path, summary_path)


def make_instances(
    cfg: Config, audit_summary: Path, table: Path, spec_path: Path, inputs: dict[str, Path] | None = None
) -> dict:
    """The configured suite's instance stage (rule instances): the sealed tables and the suite spec.
    ``inputs``: the further files the suite's stage reads (``AuditSuite.stage_inputs``)."""
    from evoaudit.suite.registry import get_suite

    if not audit_summary.exists():
        raise SuiteSpecError(
            f"{audit_summary}: no checker-audit summary there; run the checker audit first "
            "(`evoaudit audit-checkers`, or the workflow's checker_audit rule)"
        )
    missing = {name: path for name, path in (inputs or {}).items() if not path.exists()}
    if missing:
        raise SuiteSpecError(
            f"the {cfg.suite.name} instance stage reads files that do not exist: "
            + ", ".join(f"{name} {path}" for name, path in missing.items())
            + "; build them first (for APEX-Harm: `snakemake apex_worlds apex_attacks`)"
        )
    view = suite_view(cfg)
    return get_suite(cfg.suite.name).make_instances(view, audit_summary, table, spec_path, inputs or {})
