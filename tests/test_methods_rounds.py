"""Multi-round evolution (methods_params.rounds): a later round acquires with its predecessor deployed,
evolves from it, and the freeze holds the chain to the lineage's one first-round acquisition."""

from __future__ import annotations

import json
import shutil

import pytest

from evoaudit import config as config_mod
from evoaudit.evaluate.acquire import acquire
from evoaudit.jsonl import iter_records
from evoaudit.methods import reasoningbank, skillopt
from evoaudit.methods.artifact import read_meta
from evoaudit.methods.evolve import evolve
from evoaudit.ops.plan import make_plan
from evoaudit.records import Rollout
from evoaudit.report.build import round_of
from evoaudit.seal.coverage import configured_artifacts, missing_artifacts
from evoaudit.seal.freeze import freeze_lineage
from evoaudit.seal.manifest import SealError
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.suite.stage import write_sealed_tables

METHODS = ["skillopt", "awm", "reasoningbank"]
RAW = {
    "lineages": ["L1"],
    "methods": ["static", *METHODS],
    "conditions": ["static", "skillopt", "awm-literal", "reasoningbank"],
    "methods_params": {"rounds": 2},
    "suite": {"families": ["user_task_0", "user_task_3", "user_task_13"], "goals": ["injection_task_4"]},
}


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """Round 1 of every method of L1, then round 2 of each evolved one, as the workflow's rules run them."""
    results = tmp_path_factory.mktemp("results")
    cfg = config_mod.from_dict(RAW)
    table, spec = results / "suite" / "instances.parquet", results / "suite" / "suite_spec.json"
    table.parent.mkdir(parents=True)
    spec.write_text(json.dumps(write_sealed_tables(build_instances(cfg), cfg.roles.endpoint_variants, table)))
    first = results / "acquire" / "L1"
    acquire(cfg, "L1", table, spec, first / "rollouts.jsonl", first / "record.json")
    for m in ["static", *METHODS]:
        evolve(
            cfg,
            "L1",
            m,
            first / "rollouts.jsonl",
            first / "record.json",
            results / "artifacts" / "L1" / m,
            table,
        )
    for m in METHODS:
        prior = results / "artifacts" / "L1" / m
        acq = results / "rounds" / "2" / "acquire" / "L1" / m
        acquire(
            cfg, "L1", table, spec, acq / "rollouts.jsonl", acq / "record.json", prior=prior, round_index=2
        )
        out = results / "rounds" / "2" / "artifacts" / "L1" / m
        evolve(cfg, "L1", m, acq / "rollouts.jsonl", acq / "record.json", out, table, prior=prior)
    return cfg, results, table


def _rollouts(path) -> list[Rollout]:
    return list(iter_records(path, Rollout))


def test_a_later_round_acquires_the_same_episodes_with_its_predecessor_deployed(chain):
    cfg, results, _ = chain
    first = {r.instance_id: r for r in _rollouts(results / "acquire" / "L1" / "rollouts.jsonl")}
    workflows = (results / "artifacts" / "L1" / "awm" / "workflow.md").read_text()
    assert workflows.strip()
    again = _rollouts(results / "rounds" / "2" / "acquire" / "L1" / "awm" / "rollouts.jsonl")
    # The same instances and seeds (common random numbers across rounds), learning variants only, named
    # apart from round 1's, with the previous round's workflows in the system prompt.
    assert sorted(r.instance_id for r in again) == sorted(first)
    assert all(r.seed == first[r.instance_id].seed for r in again)
    assert {r.variant for r in again} <= set(cfg.roles.acquisition)
    assert {r.condition for r in again} == {"acquire-round2"}
    assert all(workflows.strip().splitlines()[0] in r.messages[0].content for r in again)
    assert all(workflows.strip().splitlines()[0] not in r.messages[0].content for r in first.values())
    record = json.loads((results / "rounds" / "2" / "acquire" / "L1" / "awm" / "record.json").read_text())
    assert record["round"] == 2 and record["deployed_sha256"]


def test_awm_and_reasoningbank_add_to_their_previous_rounds_state(chain):
    _, results, _ = chain
    one, two = results / "artifacts" / "L1", results / "rounds" / "2" / "artifacts" / "L1"
    assert (
        (two / "awm" / "workflow.md")
        .read_text()
        .startswith((one / "awm" / "workflow.md").read_text().strip())
    )
    bank1 = reasoningbank.Bank.model_validate_json(
        (one / "reasoningbank" / reasoningbank.BANK_FILE).read_text()
    )
    bank2 = reasoningbank.Bank.model_validate_json(
        (two / "reasoningbank" / reasoningbank.BANK_FILE).read_text()
    )
    assert bank2.entries[: len(bank1.entries)] == bank1.entries and len(bank2.entries) > len(bank1.entries)
    vectors = json.loads((two / "reasoningbank" / reasoningbank.VECTORS_FILE).read_text())
    assert len(vectors) == len(bank2.entries)
    assert read_meta(two / "reasoningbank").diagnostics["prior_entries"] == len(bank1.entries)
    # Entry ids stay unique: round 2's trajectories are named apart from round 1's.
    assert len({e.entry_id for e in bank2.entries}) == len(bank2.entries)


def test_skillopt_improves_the_previous_rounds_document_not_the_initial_one(chain, tmp_path):
    cfg, results, table = chain
    prior = tmp_path / "prior"
    shutil.copytree(results / "artifacts" / "L1" / "skillopt", prior)
    for p in prior.iterdir():
        p.chmod(0o644)
    marker = "- Check the recipient's IBAN against the bill before any transfer."
    (prior / skillopt.STATE_FILE).write_text((prior / skillopt.STATE_FILE).read_text() + marker + "\n")
    acq = results / "rounds" / "2" / "acquire" / "L1" / "skillopt"
    out = tmp_path / "round2"
    evolve(cfg, "L1", "skillopt", acq / "rollouts.jsonl", acq / "record.json", out, table, prior=prior)
    assert marker in (out / skillopt.STATE_FILE).read_text()
    assert marker not in cfg.methods_params.skillopt.initial_skill


def test_a_later_rounds_artifact_records_its_chain_and_freezes_with_its_lineage(chain, tmp_path):
    cfg, results, _ = chain
    origin = read_meta(results / "artifacts" / "L1" / "skillopt").inputs["acquisition"]
    meta = read_meta(results / "rounds" / "2" / "artifacts" / "L1" / "skillopt")
    assert meta.inputs["origin_acquisition"] == origin and meta.inputs["acquisition"] != origin
    dirs = [results / a for a in configured_artifacts(cfg, "L1")]
    manifest = freeze_lineage("L1", dirs, results, tmp_path / "manifest.json")
    assert not missing_artifacts(manifest, cfg, "L1")
    assert {e.path for e in manifest.entries} >= {f"rounds/2/artifacts/L1/{m}/meta.json" for m in METHODS}
    # Without round 1's SkillOpt artifact, round 2's has no predecessor among the lineage's: refused.
    broken = [d for d in dirs if d != results / "artifacts" / "L1" / "skillopt"]
    with pytest.raises(SealError, match="chain is broken"):
        freeze_lineage("L1", broken, results, tmp_path / "broken.json")


def test_unseal_coverage_and_the_plan_count_every_later_round_and_one_round_adds_nothing():
    three = config_mod.from_dict(RAW | {"methods_params": {"rounds": 3}})
    later = [a for a in configured_artifacts(three) if a.startswith("rounds/")]
    assert later == [f"rounds/{r}/artifacts/L1/{m}" for r in (2, 3) for m in METHODS]
    one = config_mod.from_dict({k: v for k, v in RAW.items() if k != "methods_params"})
    assert not [a for a in configured_artifacts(one) if a.startswith("rounds/")]
    stages = {s.stage: s for s in make_plan(three, "/nonexistent").stages}
    # Per later round: an acquire and an evolve job per method, and an evaluation job per deploying
    # condition and arm.
    assert stages["rounds"].jobs == 2 * (2 * len(METHODS) + 3 * 2)
    assert "rounds" not in {s.stage for s in make_plan(one, "/nonexistent").stages}
    assert (
        "rounds" not in one.model_dump()["methods_params"]
        and "rounds" not in one.full_dump()["methods_params"]
    )
    assert three.full_dump()["methods_params"]["rounds"] == 3


def test_a_path_names_its_round():
    from pathlib import Path

    assert round_of(Path("results/rounds/3/evaluate/L1/awm-literal/benign/shard0.jsonl")) == 3
    assert round_of(Path("results/evaluate/L1/awm-literal/benign/shard0.jsonl")) == 1
    assert round_of(Path("results/artifacts/L1/rounds/meta.json")) == 1
