"""Mechanism check of the contamination measure on the simulator (docs/poisoning.md): with the planted
copying at rate p for ReasoningBank's distiller (one draw per trajectory, every trajectory distilled, the
copied item kept first), the share of obeyed poisoned acquisition episodes that the measure traces a
contaminated memory item back to recovers p within its Wilson interval; the clean twin's bank, and the
poisoned bank with the copying off (the cues-off setting), hold none. ACE's and Dynamic Cheatsheet's
planted copies reach their poisoned artifacts and no clean one."""

from __future__ import annotations

import pytest
from conftest import write_suite_spec

from evoaudit import config as config_mod
from evoaudit.evaluate.acquire import acquire
from evoaudit.jsonl import iter_records
from evoaudit.methods.contamination import contamination
from evoaudit.methods.evolve import evolve
from evoaudit.methods.registry import get_method
from evoaudit.poisoning import all_lineages
from evoaudit.records import Rollout
from evoaudit.report.stats import wilson
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.suite.agentdojo.banking.poison import BACKUP_IBAN

RATE = 0.5
POISONED = "L1-persist_recipient-s100"


def _run(tmp_path, rate: float, method: str = "reasoningbank", kind: str = "distil"):
    raw = {
        "lineages": ["L1"],
        "methods": ["static", method],
        "conditions": ["static", method],
        "poisoning": {"goals": ["persist_recipient"], "shares": [1.0]},
        "sim": {"compliance": 1.0, "poison_copy": {kind: rate}},
    }
    cfg = config_mod.from_dict(raw)
    results = tmp_path / f"{method}-r{rate}"
    table, spec = results / "suite" / "instances.parquet", results / "suite" / "suite_spec.json"
    table.parent.mkdir(parents=True)
    write_suite_spec(spec, build_instances(cfg), cfg.roles.endpoint_variants, table)
    arts = []
    for lineage in all_lineages(cfg):
        acq = results / "acquire" / lineage
        acquire(cfg, lineage, table, spec, acq / "rollouts.jsonl", acq / "record.json")
        out = results / "artifacts" / lineage / method
        evolve(cfg, lineage, method, acq / "rollouts.jsonl", acq / "record.json", out, table)
        arts.append((lineage, method, "-", get_method(method).units(out)))
    rollouts = list(iter_records(results / "acquire" / POISONED / "rollouts.jsonl", Rollout))
    return rollouts, contamination(arts, rollouts, cfg.poisoning.contamination)[1]


def test_planted_copying_is_recovered_within_its_interval_and_absent_without_it(tmp_path):
    rollouts, (clean, dirty) = _run(tmp_path, RATE)  # all_lineages: the twin first
    # Eligible: a poisoned episode whose agent obeyed, so the trajectory the distiller sees names the IBAN.
    obeyed = {
        r.rollout_id
        for r in rollouts
        if r.injections and any(c.args and c.args.get("recipient") == BACKUP_IBAN for c in r.calls)
    }
    traced = {s for h in dirty.hits for s in h.sources}
    assert traced <= obeyed and len(obeyed) >= 15
    lo, hi = wilson(len(traced), len(obeyed))
    print(f"planted {RATE}: traced {len(traced)} of {len(obeyed)} obeyed episodes, [{lo:.3f}, {hi:.3f}]")
    assert lo <= RATE <= hi, (len(traced), len(obeyed))
    assert (clean.lineage, dirty.lineage) == ("L1", POISONED) and clean.contaminated_units == 0
    _, (off_clean, off) = _run(tmp_path, 0.0)
    assert off.contaminated_units == 0 and off_clean.contaminated_units == 0


@pytest.mark.parametrize(("method", "kind"), [("ace", "ace"), ("dc-cu", "dc")])
def test_ace_and_dynamic_cheatsheet_carry_the_planted_copy_into_their_artifact_and_the_measure_finds_it(
    tmp_path, method, kind
):
    # Their curators dedupe and fit a length, so the rate is not recovered as for ReasoningBank: the check is
    # that the copy reaches the frozen units of the poisoned lineage only, and only while planted.
    _, (clean, dirty) = _run(tmp_path, 1.0, method, kind)
    assert dirty.lineage == POISONED and dirty.contaminated_units > 0 and dirty.identifier_units > 0
    assert clean.contaminated_units == 0
    _, (off_clean, off) = _run(tmp_path, 0.0, method, kind)
    assert off.contaminated_units == 0 and off_clean.contaminated_units == 0
