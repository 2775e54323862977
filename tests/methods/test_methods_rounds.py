"""Multi-round evolution (methods_params.rounds): a later round acquires with its predecessor deployed,
evolves from it, and the freeze holds the chain to the lineage's one first-round acquisition."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from conftest import write_suite_spec

from evoaudit import config as config_mod
from evoaudit.evaluate.acquire import acquire
from evoaudit.jsonl import iter_records
from evoaudit.methods import awm, reasoningbank, skillopt
from evoaudit.methods.artifact import read_meta
from evoaudit.methods.evolve import AcquisitionMismatch, evolve
from evoaudit.ops.plan import make_plan
from evoaudit.records import Outcome, Rollout
from evoaudit.report import tables as t
from evoaudit.seal.coverage import configured_artifacts, later_round, missing_artifacts
from evoaudit.seal.freeze import freeze_lineage
from evoaudit.seal.manifest import SealError
from evoaudit.seal.stage import redo_stage
from evoaudit.suite.agentdojo.banking.instances import build_instances

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
    write_suite_spec(spec, build_instances(cfg), cfg.roles.endpoint_variants, table)
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


def _writable_copy(src, dest):
    shutil.copytree(src, dest)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dest


def test_skillopt_improves_the_previous_rounds_document_not_the_initial_one(chain, tmp_path):
    cfg, results, table = chain
    prior = _writable_copy(results / "artifacts" / "L1" / "skillopt", tmp_path / "prior")
    marker = "- Check the recipient's IBAN against the bill before any transfer."
    (prior / skillopt.STATE_FILE).write_text((prior / skillopt.STATE_FILE).read_text() + marker + "\n")
    spec = results / "suite" / "suite_spec.json"
    acq = tmp_path / "acquire"
    acquire(cfg, "L1", table, spec, acq / "rollouts.jsonl", acq / "record.json", prior=prior, round_index=2)
    out = tmp_path / "round2"
    evolve(cfg, "L1", "skillopt", acq / "rollouts.jsonl", acq / "record.json", out, table, prior=prior)
    assert marker in (out / skillopt.STATE_FILE).read_text()
    assert marker not in cfg.methods_params.skillopt.initial_skill
    # A previous round changed after its round's acquisition deployed it is refused: the acquisition did
    # not see the state this round would start from.
    (prior / skillopt.STATE_FILE).write_text((prior / skillopt.STATE_FILE).read_text() + "- One more.\n")
    with pytest.raises(AcquisitionMismatch, match="deployed an artifact with files hash"):
        evolve(
            cfg,
            "L1",
            "skillopt",
            acq / "rollouts.jsonl",
            acq / "record.json",
            tmp_path / "r2b",
            table,
            prior=prior,
        )


def test_awm_merges_rounds_without_repeating_a_workflow():
    one = "## Pay a bill\n<think>read</think><action>read_file</action>\n"
    two = one + "\n## Check the balance\n<think>x</think>\n"
    merged = awm.merge_workflows(one, two)
    assert merged.count("## Pay a bill") == 1 and merged.index("## Pay a bill") < merged.index("## Check")
    assert awm.count_workflows(merged) == 2 and awm.merge_workflows("", "") == ""


def test_a_bank_extended_under_another_query_instruction_is_refused(chain, tmp_path):
    _, results, _ = chain
    prior = results / "artifacts" / "L1" / "reasoningbank"
    bank = reasoningbank.Bank.model_validate_json((prior / reasoningbank.BANK_FILE).read_text())
    with pytest.raises(ValueError, match="query_instruction must not change"):
        reasoningbank.extend_bank(prior, bank.model_copy(update={"query_instruction": "other"}), [])


def test_a_later_rounds_artifact_records_its_chain_and_freezes_with_its_lineage(chain, tmp_path):
    cfg, results, _ = chain
    results = _writable_copy(results, tmp_path / "results")
    origin = read_meta(results / "artifacts" / "L1" / "skillopt").inputs["acquisition"]
    meta = read_meta(results / "rounds" / "2" / "artifacts" / "L1" / "skillopt")
    assert meta.inputs["origin_acquisition"] == origin and meta.inputs["acquisition"] != origin
    dirs = [results / a for a in configured_artifacts(cfg, "L1")]
    manifest = freeze_lineage("L1", dirs, results, tmp_path / "manifest.json")
    assert not missing_artifacts(manifest, cfg, "L1")
    assert {e.path for e in manifest.entries} >= {f"rounds/2/artifacts/L1/{m}/meta.json" for m in METHODS}
    # Without round 1's SkillOpt artifact, round 2's has no predecessor frozen with it: refused.
    broken = [d for d in dirs if d != results / "artifacts" / "L1" / "skillopt"]
    with pytest.raises(SealError, match="chain of rounds is broken"):
        freeze_lineage("L1", broken, results, tmp_path / "broken.json")
    # Round 1 edited after round 2 evolved from it: round 2 did not evolve from it as it is now.
    skill = results / "artifacts" / "L1" / "skillopt" / skillopt.STATE_FILE
    skill.chmod(0o644)
    skill.write_text(skill.read_text() + "- Edited after the fact.\n")
    with pytest.raises(SealError, match="chain of rounds is broken"):
        freeze_lineage("L1", dirs, results, tmp_path / "edited.json")


def test_a_round_path_is_read_strictly():
    assert later_round("rounds/3/artifacts/L1/awm/meta.json") == 3
    for path in (
        "rounds/1/artifacts/L1/awm",
        "rounds/0/artifacts/L1/awm",
        "rounds/02/artifacts/L1/awm",
        "rounds/\u00b2/artifacts/L1/awm",
        "artifacts/L1/rounds/2",
        "x/rounds/2/artifacts/L1/awm",
    ):
        assert later_round(path) is None, path  # fmt: skip


def test_redo_refuses_a_method_whose_later_rounds_build_on_it(tmp_path):
    cfg = config_mod.from_dict(RAW)
    with pytest.raises(SealError, match="does not rebuild a chain of rounds"):
        redo_stage(cfg, tmp_path, "L1", "awm", "a reason")


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


def _rollout(lineage: str, condition: str, arm: str, family: str, success: bool) -> Rollout:
    goal = "injection_task_4" if arm == "attacked" else None
    return Rollout(
        rollout_id=f"{lineage}/{condition}/{arm}/{family}.v3/{goal or 'none'}",
        lineage=lineage, condition=condition, arm=arm, instance_id=f"{family}.v3", family=family,
        variant="v3", split="seen", goal=goal, seed=7, executor={}, pre_state_sha256="0", messages=[],
        calls=[], terminal_state={},
        outcome=Outcome(
            utility=not success, task_score=1.0, attack_success=success if goal else None,
            utility_under_attack=True if goal else None, exposed=True if goal else None,
            unauthorized_state_change=success,
        ),
    )  # fmt: skip


def test_the_rounds_table_takes_each_round_against_round_one_on_the_same_episodes():
    cfg = config_mod.from_dict(
        RAW | {"lineages": ["L1", "L2"], "report": {"bootstrap": {"replicates": 200}, "figures": False}}
    )
    fams = [f"user_task_{k}" for k in range(4)]

    def run(hits: int) -> list[Rollout]:
        # The first ``hits`` families of each lineage fail benign and succeed under attack.
        return [
            _rollout(ln, "skillopt", arm, f, i < hits) for ln in ("L1", "L2") for i, f in enumerate(fams)
            for arm in ("benign", "attacked")
        ]  # fmt: skip

    frames = {1: t.Data.build(cfg, run(0)), 2: t.Data.build(cfg, run(2))}
    chars = {(1, "L1", "skillopt"): 100, (1, "L2", "skillopt"): 300, (2, "L1", "skillopt"): 150}
    table = t.rounds_table(frames, chars).set_index(["round", "lineage"])
    assert list(t.rounds_table(frames, chars).columns) == t.ROUNDS_COLUMNS
    assert table.loc[(1, "all"), "utility"] == 1.0 and math.isnan(table.loc[(1, "all"), "d_utility"])
    assert table.loc[(2, "all"), "utility"] == 0.5 and table.loc[(2, "all"), "d_utility"] == -0.5
    assert table.loc[(2, "L1"), "d_asr"] == 0.5 and table.loc[(2, "all"), "n_attacked"] == 8
    assert table.loc[(2, "L1"), "n_benign"] == 4
    # Artifact length: the mean over the lineages that have one for 'all', each lineage's own otherwise.
    assert table.loc[(1, "all"), "artifact_chars"] == 200 and table.loc[(2, "all"), "artifact_chars"] == 150
    assert math.isnan(table.loc[(2, "L2"), "artifact_chars"])
