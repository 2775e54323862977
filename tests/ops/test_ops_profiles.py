"""The Snakemake profiles name only rules and groups the workflow has, and declare what the docs promise."""

from __future__ import annotations

import re

import yaml
from conftest import REPO

PROFILES = REPO / "workflow" / "profiles"


def _rules_and_groups() -> tuple[set[str], set[str]]:
    text = "\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    rules = set(re.findall(r"^rule (\w+):", text, flags=re.M))
    groups = set(re.findall(r"^\s+group:\s*\n\s+\"(\w+)\"", text, flags=re.M))
    groups |= set(re.findall(r"^\s+group:\s*\"(\w+)\"", text, flags=re.M))
    return rules, groups


def test_slurm_profile_targets_existing_rules_and_groups():
    prof = yaml.safe_load((PROFILES / "slurm" / "config.yaml").read_text())
    rules, groups = _rules_and_groups()
    assert prof["executor"] == "slurm"
    unknown = set(prof["set-resources"]) - rules
    assert not unknown, f"workflow/profiles/slurm/config.yaml: set-resources names unknown rules {unknown}"
    assert set(prof["group-components"]) <= groups, (prof["group-components"], groups)
    for rule, res in prof["set-resources"].items():
        assert res["mem_mb"] > 0 and res["runtime"] > 0, rule
    assert prof["default-resources"]["mem_mb"] > 0 and prof["default-resources"]["runtime"] > 0
    # A rule that asks the optimizer for every acquisition trajectory runs about as long as evolution.
    from evoaudit.ops.resources import ENDPOINT_RULES

    for rule in (r for r, endpoint in ENDPOINT_RULES.items() if endpoint == "optimizer"):
        assert prof["set-resources"].get(rule) == prof["set-resources"]["evolve"], rule
    # Without this the plugin waits 40 s before the first status check of every job.
    assert prof["slurm-init-seconds-before-status-checks"] <= 10


def test_every_endpoint_rule_declares_api_slots_and_the_local_switch():
    from evoaudit.ops.resources import ENDPOINT_RULES

    text = "\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    for rule in ENDPOINT_RULES:
        body = re.search(rf"^rule {rule}:\n(.*?)(?=^\S|\Z)", text, flags=re.M | re.S)
        assert body, f"rule {rule} not found in workflow/rules"
        # An evaluation shard claims at most its episodes (get_evaluate_slots), others their concurrency.
        claim = (
            "api_slots=get_evaluate_slots"
            if rule == "evaluate"
            else f'api_slots=evoaudit_resources.api_slots(CFG, "{rule}")'
        )
        assert claim in body.group(1), rule
        assert "localrule: evoaudit_resources.local_endpoint_rules(CFG)" in body.group(1), rule


def test_default_profile_resumes_without_asking():
    prof = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    assert prof["rerun-incomplete"] is True


def test_snakemake_loads_the_default_profile_as_the_workflow_profile(tmp_path):
    # profiles/default beside the Snakefile is the workflow profile Snakemake picks by itself.
    import shutil

    from conftest import copy_workflow, snakemake

    work = copy_workflow(tmp_path)
    shutil.copytree(REPO / "profiles", work / "profiles")
    proc = snakemake(work, "-n")
    assert "Using workflow specific profile profiles/default" in proc.stderr, proc.stderr[-2000:]
