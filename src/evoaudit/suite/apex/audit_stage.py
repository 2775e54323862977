"""The suite stage of the self-evolution audit with ``suite.name: apex`` (rules checker_audit, instances).

The Banking audit's rules run unchanged on APEX-Harm workspaces; only these two suite-stage entry points
differ. The checker audit probes AgentDojo's official predicates, which APEX-Harm does not have: its
build-time probes (goal oracles, placements, exposure rules, programs) are the ``apex_probes`` rule, so
here the audit is skipped and the reason recorded. The instance stage writes the learning table (the
acquisition variants, ``suite.apex.variants[1:]``), the sealed endpoint file (``suite.apex.variants[0]``,
the variant the frozen attack set is built on) and a suite spec with the same fields the Banking spec has,
plus the worlds' spec and the attack set's sha256s.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

from evoaudit.config import SuiteConfig, SuiteView
from evoaudit.errors import AuditError
from evoaudit.hashing import sha256_file
from evoaudit.records import CheckerAuditSummary, Instance
from evoaudit.suite.apex.attacks.attack_set import load_attack_set
from evoaudit.suite.stage import (
    AUDIT_FIELDS,
    EXTENSION_FIELDS,
    GOAL_FIELDS,
    VARIANT_FIELDS,
    extension_csv_path,
    goal_csv_path,
    variant_csv_path,
    write_sealed_tables,
    write_spec,
)

SKIP_REASON = (
    "suite apex: AgentDojo's official predicates are not part of APEX-Harm; its build-time probes (goal "
    "oracles and no-ops, placements, exposure rules, programs) are the apex_probes rule "
    "(snakemake apex_probes), and each world is self-checked when it is built (apex_manifest.json)"
)


def _header_only(path: Path, fields: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        csv.DictWriter(fh, fieldnames=fields).writeheader()


def skip_checker_audit(suite_cfg: SuiteConfig, csv_path: Path, summary_path: Path) -> dict[str, Any]:
    """The checker audit's outputs for APEX-Harm: empty probe tables and a summary saying why."""
    for path, fields in (
        (csv_path, AUDIT_FIELDS),
        (goal_csv_path(csv_path), GOAL_FIELDS),
        (extension_csv_path(csv_path), EXTENSION_FIELDS),
    ):
        _header_only(path, fields)
    summary = CheckerAuditSummary(
        suite="apex",
        profile=suite_cfg.checker_audit.profile,
        skipped=SKIP_REASON,
        failing={},
        passing=[],
        defects={},
        extension={},
        strict_passing=[],
        excluded={},
        goal_checkers={},
    )
    summary.write(summary_path)
    return summary.model_dump(mode="json")


def check_roles(view: SuiteView, where: str = "config") -> None:
    """The audit's roles must say what the APEX variants are: the endpoint is ``variants[0]`` (the one the
    frozen attack set is built on); the others are split between acquisition and validation."""
    variants = view.suite.apex.variants
    endpoint, learning = variants[0], set(variants[1:])
    wrong = []
    if set(view.roles.benign_endpoint) != {endpoint} or set(view.roles.attacked_endpoint) != {endpoint}:
        wrong.append(f"roles.benign_endpoint and roles.attacked_endpoint must be [{endpoint}]")
    if set(view.roles.acquisition) | set(view.roles.validation) != learning:
        wrong.append(
            f"roles.acquisition and roles.validation together must be the other variants {sorted(learning)} "
            "(e.g. suite.apex.variants [v0, v1, v2], acquisition [v1], validation [v2])"
        )
    if wrong:
        raise AuditError(
            f"{where}: suite.name apex with suite.apex.variants {list(variants)}: " + "; ".join(wrong)
        )


def assign_split(instances: list[Instance], n_unseen: int) -> dict[str, str]:
    """Whole domains held out (ordered by a hash of their name) while they fit in ``n_unseen`` families;
    at least one domain is held out and at least one stays seen."""
    domains: dict[str, list[str]] = {}
    for inst in instances:
        fams = domains.setdefault(inst.cluster, [])
        if inst.family not in fams:
            fams.append(inst.family)
    if len(domains) < 2:
        raise AuditError(f"suite apex: one domain only ({sorted(domains)}); no seen/unseen split possible")
    order = sorted(domains, key=lambda d: hashlib.sha256(d.encode()).hexdigest())
    split = {f: "seen" for fams in domains.values() for f in fams}
    held = 0
    for d in order[:-1]:
        if held and held + len(domains[d]) > n_unseen:
            continue
        for f in domains[d]:
            split[f] = "unseen"
        held += len(domains[d])
    return split


def make_instances(
    suite: Any,
    view: SuiteView,
    audit_summary: Path,
    table: Path,
    spec_path: Path,
    worlds_spec: Path,
    attack_set: Path,
) -> dict[str, Any]:
    """Learning table, sealed endpoint file and suite spec for the audit on APEX-Harm workspaces
    (``suite``: the ``ApexSuite`` asking)."""
    summary = CheckerAuditSummary.read(audit_summary)
    if summary.suite != "apex" or summary.skipped is None:
        raise AuditError(f"{audit_summary}: not written for suite apex; rerun the checker_audit rule")
    check_roles(view, "config (suite.name apex)")
    built = suite.build_instances(view)
    split = assign_split(built, view.suite.n_unseen)
    instances = [
        i.model_copy(update={"split": split[i.family], "role": view.roles.of(i.variant)}) for i in built
    ]
    attacks = load_attack_set(attack_set)
    # Every attack the config names must reach some endpoint instance, or the attacked arm would be empty.
    endpoint = [i for i in instances if i.variant in view.roles.endpoint_variants]
    reached = {a for i in endpoint for a in suite.attacks(view.suite.goals, i)}
    if not reached:
        raise AuditError(
            f"{attack_set}: no attack of the frozen set matches suite.goals {list(view.suite.goals)}; name "
            "categories the set holds (c1..c6, c4perm) or attack ids from it"
        )
    variant_csv = variant_csv_path(spec_path)
    _header_only(variant_csv, VARIANT_FIELDS)
    tables = write_sealed_tables(instances, view.roles.endpoint_variants, table)
    families = suite.families(view)
    spec = {
        "suite": "apex",
        "benchmark_version": suite.benchmark_version,
        "checker_audit_profile": view.suite.checker_audit.profile,
        "checker_audit_sha256": sha256_file(audit_summary),
        "checker_audit_skipped": summary.skipped,
        **tables,
        "variant_probes_sha256": sha256_file(variant_csv),
        "families": families,
        "excluded": {},
        # No official predicate is kept or repaired: every task is scored by its generated rubric.
        "official_unchanged": [],
        "official_only_spurious": [],
        "corrections": {},
        "goal_checkers": {},
        "goal_checker_probes": None,
        # What the instances point at: the worlds (per variant and task) and the frozen attack set.
        "apex_worlds_spec_sha256": json.loads(worlds_spec.read_text())["sha256"],
        "apex_worlds_spec_file_sha256": sha256_file(worlds_spec),
        "apex_attack_set_sha256": sha256_file(attack_set),
        "apex_attacks": sorted(reached),
        "apex_attack_count": len(attacks),
    }
    return write_spec(spec_path, spec, instances)
