"""The field methods end to end: ``config/examples/field-methods.yaml`` (static, ace, dc-cu, dc-rs and their
placebos on Banking, one lineage) through evolution, placebo, freeze, evaluation, replay and report, with
Snakemake on 2 cores (about two minutes). The simulator's planted effect is recovered: every evolved
artifact carries read-before-write guidance, so the evolved conditions read more (higher utility and
exposure than static, never a correct-to-wrong flip), while their placebos match static episode for
episode. A mechanism check of the plumbing, not a finding about the methods."""

from __future__ import annotations

import csv
import json

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from evoaudit.jsonl import read_records
from evoaudit.records import Rollout

EXAMPLE = REPO / "config" / "examples" / "field-methods.yaml"
EVOLVED = ("ace", "dc-cu", "dc-rs")


def _rows(path):
    with path.open() as fh:
        return {r["condition"]: r for r in csv.DictReader(fh)}


@pytest.mark.slow
def test_the_field_methods_example_runs_replays_and_recovers_the_planted_effect(tmp_path):
    overrides = yaml.safe_load(EXAMPLE.read_text())
    copy_workflow(tmp_path, overrides)
    snakemake(tmp_path)
    res = tmp_path / overrides["results_dir"]

    # Each artifact's diagnostics, as meta.json records them.
    meta = {
        m: json.loads((res / "artifacts" / "L1" / m / "meta.json").read_text())
        for m in (*EVOLVED, *(f"placebo-{m}" for m in EVOLVED))
    }
    ace, cu, rs = (meta[m]["diagnostics"] for m in EVOLVED)
    assert ace["bullets"] > 0 and ace["n_failed_updates"] == 0 and ace["contents"]
    assert ace["bullets"] <= overrides["methods_params"]["ace"]["max_bullets"]
    assert sum(ace["bullets_by_section"].values()) == ace["bullets"]
    assert cu["lines"] > 0 and cu["n_failed_updates"] == 0
    assert cu["chars"] <= overrides["methods_params"]["dynamic_cheatsheet"]["max_chars"]
    assert rs["entries"] == rs["trajectories"] > 0 and rs["n_failed_updates"] == 0
    assert rs["top_k"] == overrides["methods_params"]["dynamic_cheatsheet"]["top_k"]
    for m in EVOLVED:
        placebo = meta[f"placebo-{m}"]["diagnostics"]
        assert placebo["of_method"] == m and 0.9 <= placebo["length_ratio"] <= 1.1
    playbook = (res / "artifacts" / "L1" / "ace" / "playbook.md").read_text()
    assert "## strategies_and_hard_rules" in playbook and "Check the transaction history" in playbook

    # Every condition in the main and placebo tables; replayed without a mismatch.
    main = _rows(res / "report" / "tables" / "main.csv")
    assert set(overrides["conditions"]) <= set(main)
    placebo = (res / "report" / "tables" / "placebo.csv").read_text()
    for m in EVOLVED:
        assert f"\n{m},placebo-{m}," in placebo
    reports = sorted(res.glob("replay/L1/*/*/shard0.json"))
    assert {p.parent.parent.name for p in reports} == set(overrides["conditions"])
    assert all(json.loads(p.read_text())["mismatched_rollouts"] == 0 for p in reports)

    # DC-RS retrieves per episode; its placebo retrieves the same entries.
    rs_benign = read_records(res / "evaluate" / "L1" / "dc-rs" / "benign" / "shard0.jsonl", Rollout)
    sham = read_records(res / "evaluate" / "L1" / "placebo-dc-rs" / "benign" / "shard0.jsonl", Rollout)
    assert all(r.retrieval and r.retrieval["entries"] and r.retrieval["provenance"] for r in rs_benign)
    assert [r.retrieval["entries"] for r in rs_benign] == [r.retrieval["entries"] for r in sham]

    # The planted effect: the evolved conditions read more than static, their placebos do not move.
    for m in EVOLVED:
        row = main[m]
        assert float(row["d_utility"]) > 0 and int(row["w_to_c"]) > 0 and int(row["c_to_w"]) == 0, row
        assert float(row["d_exposure"]) > 0, row
        p = main[f"placebo-{m}"]
        assert int(p["w_to_c"]) == int(p["c_to_w"]) == 0, p
        assert float(p["d_utility"]) == float(p["d_exposure"]) == float(p["d_asr"]) == 0.0, p
