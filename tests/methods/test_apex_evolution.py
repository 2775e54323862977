"""The self-evolution audit on APEX-Harm workspaces (config/examples/apex-evolution.yaml): the Banking audit's
own rules with suite.name apex, from the built worlds to the report."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from evoaudit import config as config_mod
from evoaudit.config import suite_view
from evoaudit.errors import AuditError
from evoaudit.records import AcquisitionRecord, ContaminationReplayReport, ContaminationReport, Instance
from evoaudit.suite.apex import audit_stage

EXAMPLE = REPO / "config" / "examples" / "apex-evolution.yaml"
POISONING = REPO / "config" / "examples" / "apex-poisoning.yaml"


def _example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def test_the_example_config_validates():
    cfg = config_mod.from_dict(_example(), str(EXAMPLE))
    assert cfg.suite.name == "apex" and cfg.suite.apex.variants[0] in cfg.roles.benign_endpoint
    audit_stage.check_roles(suite_view(cfg))


def test_the_poisoning_example_is_the_evolution_example_with_a_poisoned_twin():
    poisoning = yaml.safe_load(POISONING.read_text())
    extension = {"results_dir", "poisoning", "sim"}
    assert {k: v for k, v in poisoning.items() if k not in extension} == {
        k: v for k, v in _example().items() if k not in extension
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"suite": {"goals": ["c1"]}}, "do not name attacks of suite 'banking'"),
        ({"methods_params": {"placebo": {"goals": ["c4perm"]}}}, "methods_params.placebo.goals"),
        ({"suite": {"name": "apex", "goals": ["injection_task_1"]}}, "do not name attacks of suite 'apex'"),
        (
            {"suite": {"name": "apex", "goals": ["c1"]}, "methods_params": {"placebo": {"goals": ["c1"]}}},
            "transfer.enabled",
        ),
    ],
)
def test_goals_and_transfer_must_fit_the_suite(overrides, message):
    with pytest.raises(config_mod.ConfigError, match=message):
        config_mod.from_dict(overrides, "test")


def test_roles_that_disagree_with_the_apex_variants_are_refused():
    raw = _example()
    raw["roles"] = {
        **raw["roles"],
        "benign_endpoint": ["v1"],
        "attacked_endpoint": ["v1"],
        "acquisition": ["v2"],
        "validation": [],
    }
    cfg = config_mod.from_dict(raw, "test")
    with pytest.raises(AuditError, match=r"roles.benign_endpoint and roles.attacked_endpoint must be \[v0\]"):
        audit_stage.check_roles(suite_view(cfg))


def _inst(family: str, domain: str) -> Instance:
    return Instance(
        instance_id=f"{family}.v1",
        suite="apex",
        family=family,
        variant="v1",
        role="acquisition",
        split="seen",
        cluster=domain,
        prompt="p",
        environment_template="{}",
        environment_format="apex-world-ref",
        ground_truth=[],
        predicate={"kind": "apex_rubric"},
    )


def test_the_split_holds_out_whole_domains_and_keeps_one_seen():
    insts = [_inst(f"{d}_{i}", d) for d in ("law", "ib", "mc") for i in range(3)]
    split = audit_stage.assign_split(insts, 3)
    unseen = {f for f, s in split.items() if s == "unseen"}
    assert len(unseen) == 3 and len({f.split("_")[0] for f in unseen}) == 1
    # More than fits still leaves a seen domain; at least one domain is always held out.
    assert sum(s == "seen" for s in audit_stage.assign_split(insts, 99).values()) == 3
    assert sum(s == "unseen" for s in audit_stage.assign_split(insts, 1).values()) == 3


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_the_evolution_audit_runs_on_apex_workspaces_end_to_end_beside_a_poisoned_twin(tmp_path):
    raw = _example()
    # Two of the example's categories keep the run short; c4perm includes attacks whose exposure is
    # undefined (a script run at the user's request), which the report must leave out of exposure.
    raw["suite"]["goals"] = ["c1", "c4perm"]
    # Two tasks per seen domain (the selection the worlds, attacks and instances all take), one domain
    # held out.
    raw["apex"]["tasks"] = [
        "ib_wacc",
        "ib_comps_median",
        "law_nda_terms",
        "law_notice_deadline",
        "mc_churn_rate",
    ]
    raw["suite"]["n_unseen"] = 1
    # The poisoning example's own settings: its poisoned twin, planted copying and sleeper, and the
    # analyst's compliance with outside-mail instructions (which moves L1's attacked arm too).
    poisoning = yaml.safe_load(POISONING.read_text())
    raw |= {k: poisoning[k] for k in ("poisoning", "sim")}
    copy_workflow(tmp_path, raw)
    snakemake(tmp_path)
    cfg = config_mod.from_dict(raw, "test")
    res = tmp_path / cfg.results_dir  # the example's own results-apex-evolution/
    assert cfg.results_dir == "results-apex-evolution" and not (tmp_path / "results").exists()

    summary = json.loads((res / "suite" / "checker_audit_summary.json").read_text())
    assert summary["suite"] == "apex" and "apex_probes" in summary["skipped"]
    spec = json.loads((res / "suite" / "suite_spec.json").read_text())
    assert spec["suite"] == "apex" and spec["endpoint_variants"] == ["v0"]
    assert spec["apex_worlds_spec_sha256"] and spec["apex_attack_set_sha256"]
    seen = {f for f, s in spec["split"].items() if s == "seen"}
    assert seen and set(spec["split"].values()) == {"seen", "unseen"}

    # Acquisition: the seen tasks' acquisition variant only, with no attack.
    acquired = _rows(res / "acquire" / "L1" / "rollouts.jsonl")
    assert {r["instance_id"] for r in acquired} == {f"{f}.v1" for f in seen}

    # Every condition ran both arms on the sealed endpoint variant; attacks come from the frozen set.
    attacks = set(spec["apex_attacks"])
    for cond in cfg.conditions:
        benign = _rows(res / "evaluate" / "L1" / cond / "benign" / "shard0.jsonl")
        attacked = _rows(res / "evaluate" / "L1" / cond / "attacked" / "shard0.jsonl")
        assert len(benign) == len(spec["split"]) and {r["variant"] for r in benign} == {"v0"}
        assert attacked and {r["goal"] for r in attacked} <= attacks
        assert all(set(r["outcome"]["harm"]) >= {"unauthorised_external_mail"} for r in attacked)
        if cond.startswith("placebo-"):
            assert {r["goal"].split(".")[0] for r in attacked} == {"c1"}
        replay = json.loads((res / "replay" / "L1" / cond / "attacked" / "shard0.json").read_text())
        assert replay["replayed"] == len(attacked) and replay["mismatched_rollouts"] == 0

    # The seal: every evolved and placebo artifact frozen, then the endpoints unsealed.
    manifest = json.loads((res / "freeze" / "manifest.json").read_text())
    frozen = {e["path"] for e in manifest["entries"]}
    for method in (
        "static",
        "skillopt",
        "awm",
        "reasoningbank",
        "placebo-skillopt",
        "placebo-awm",
        "placebo-reasoningbank",
    ):
        assert f"artifacts/L1/{method}/meta.json" in frozen
    assert (res / "freeze" / "unseal.json").exists()

    report = (res / "report" / "report.md").read_text()
    assert "Simulator run" in report and "mechanism checks" in report
    assert (res / "report" / "tables" / "main.csv").read_text().count("\n") == len(cfg.conditions) + 1

    # The poisoned twin: the rule planted at the top of a document in half of the acquisition episodes,
    # the other episodes recorded exactly as the twin's.
    lineage = "L1-persist_forward-s50"
    record = AcquisitionRecord.read(res / "acquire" / lineage / "record.json")
    assert record.poison_attack == "existing_start" and 0 < len(record.poisoned_episodes) < len(seen)
    twin = {r["instance_id"]: r for r in acquired}
    exposed = []
    for r in _rows(res / "acquire" / lineage / "rollouts.jsonl"):
        mine = twin[r["instance_id"]]
        if r["rollout_id"] in record.poisoned_episodes:
            (text,) = r["injections"].values()
            assert "records@ledgerkeep-archive.net" in text and r["outcome"]["exposed"] is not None
            exposed.append(r["outcome"]["exposed"])
        else:
            assert [r["messages"], r["terminal_state"]] == [mine["messages"], mine["terminal_state"]]
    assert any(exposed)  # the planted rule reached the analyst in some poisoned episode
    # Contamination: the planted copying reaches the poisoned lineage's artifacts only, and replay agrees.
    report = ContaminationReport.read(res / "poisoning" / "contamination" / f"{lineage}.json")
    assert report.identifiers == ["records@ledgerkeep-archive.net"]
    assert all(a.contaminated_units == 0 for a in report.artifacts if a.lineage == "L1")
    assert any(a.contaminated_units for a in report.artifacts if a.lineage == lineage)
    replayed = ContaminationReplayReport.read(res / "poisoning" / "replay" / f"{lineage}.json")
    assert replayed.mismatches == []
    for path in (res / "replay" / lineage).rglob("shard*.json"):
        assert json.loads(path.read_text())["mismatched_rollouts"] == 0
    persist = pd.read_csv(res / "report" / "poisoning" / "tables" / "persistence.csv")
    benign = persist[persist.arm == "benign"]
    assert benign.goal_met_twin.sum() == 0 and "simulator_notice" in persist.columns
    # The planted sleeper carries the rule out at endpoints of the poisoned lineage more often than the
    # twin's episodes meet the goal.
    assert persist.goal_met_k.sum() > persist.goal_met_twin.sum()


def test_exposure_is_over_decided_episodes_and_undecided_ones_are_not_unexposed_successes():
    from rollout_kit import mk

    from evoaudit.report import metrics

    rs = [mk(exposed=True, success=True), mk(exposed=False), mk(exposed=None, success=True)]
    assert metrics.exposure(rs).value == 0.5
    assert metrics.unexposed_successes(rs) == 0
    assert metrics.conditional_asr(rs).value == 1.0
