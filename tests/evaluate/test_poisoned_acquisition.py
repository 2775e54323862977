"""Poisoned acquisition (docs/poisoning.md): a poisoned lineage runs its clean twin's episodes with its
twin's seeds, and its record differs from the twin's only in the episodes that carry the poison."""

from __future__ import annotations

import json

import pytest
from conftest import write_suite_spec

from evoaudit import config as config_mod
from evoaudit.evaluate.acquire import acquire
from evoaudit.jsonl import iter_records
from evoaudit.poisoning import all_lineages, poisoned_lineages, twin_of
from evoaudit.records import AcquisitionRecord, Rollout
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.suite.agentdojo.banking.poison import BACKUP_IBAN

RAW = {
    "lineages": ["L1"],
    "methods": ["static", "reasoningbank"],
    "conditions": ["static", "reasoningbank"],
    "suite": {"families": ["user_task_0", "user_task_3", "user_task_13"], "goals": ["injection_task_4"]},
    "poisoning": {"goals": ["persist_recipient"], "shares": [0.5]},
}


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    cfg = config_mod.from_dict(RAW)
    table, spec = results / "suite" / "instances.parquet", results / "suite" / "suite_spec.json"
    table.parent.mkdir(parents=True)
    write_suite_spec(spec, build_instances(cfg), cfg.roles.endpoint_variants, table)
    out = {}
    for lineage in all_lineages(cfg):
        d = results / "acquire" / lineage
        acquire(cfg, lineage, table, spec, d / "rollouts.jsonl", d / "record.json")
        rollouts = list(iter_records(d / "rollouts.jsonl", Rollout))
        out[lineage] = (rollouts, AcquisitionRecord.read(d / "record.json"))
    return cfg, out


def _neutral(r: Rollout) -> dict:
    """The rollout with the lineage's name taken out of its identity (the only field that must differ)."""
    data = json.loads(r.model_dump_json())
    data.pop("wall_s", None)
    data["lineage"] = twin_of(data["lineage"])
    data["rollout_id"] = data["rollout_id"].split("/", 1)[1]
    return data


def test_poisoned_record_differs_from_its_twin_only_where_the_poison_was_placed(twins):
    cfg, out = twins
    (p,) = poisoned_lineages(cfg)
    assert p.name == "L1-persist_recipient-s50" and twin_of(p.name) == "L1"
    clean, clean_rec = out["L1"]
    dirty, dirty_rec = out[p.name]
    assert clean_rec.poisoned_episodes is None and "poison_goal" not in clean_rec.dumps()
    assert dirty_rec.poison_twin == "L1" and dirty_rec.poison_goal == "persist_recipient"
    placed = set(dirty_rec.poisoned_episodes or [])
    assert 0 < len(placed) <= len(dirty)
    assert len(placed) == min(round(0.5 * len(dirty)), sum(r.goal is not None for r in dirty))
    by_instance = {r.instance_id: r for r in clean}
    assert sorted(by_instance) == sorted(r.instance_id for r in dirty)
    differing = 0
    for r in dirty:
        twin = by_instance[r.instance_id]
        assert r.seed == twin.seed  # the twin's seed, poisoned or not
        if r.rollout_id in placed:
            assert r.goal == "persist_recipient" and r.injections and twin.injections == {}
            assert all(BACKUP_IBAN in text for text in r.injections.values())
            differing += _neutral(r) != _neutral(twin)
        else:
            assert r.goal is None and not r.injections
            assert _neutral(r) == _neutral(twin), r.rollout_id
    # The poison reached the agent: at least one poisoned episode's record is not its twin's.
    assert differing > 0
