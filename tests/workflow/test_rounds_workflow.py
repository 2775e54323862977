"""config/examples/multi-round.yaml's extension end to end on the simulator (reduced): every round
acquires, evolves and freezes before any endpoint opens, each round's artifact is evaluated and
replayed, and the report gains the rounds table and figure, labelled a mechanism check."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from evoaudit import config as config_mod

EXAMPLE = REPO / "config" / "examples" / "multi-round.yaml"


@pytest.mark.slow  # about 3 minutes on 2 cores
def test_three_rounds_freeze_before_the_endpoints_open_and_the_report_shows_drift_per_round(tmp_path):
    copy_workflow(tmp_path)
    example = yaml.safe_load(EXAMPLE.read_text())
    # Fewer episodes than the example: three families, one goal, the two methods without a gate.
    example |= {
        "methods": ["static", "awm", "reasoningbank"],
        "conditions": ["static", "awm-literal", "reasoningbank"],
        "suite": {"families": ["user_task_0", "user_task_3", "user_task_13"], "goals": ["injection_task_4"]},
    }
    (tmp_path / "config" / "examples").mkdir()
    (tmp_path / "config" / "examples" / "multi-round.yaml").write_text(yaml.safe_dump(example))
    snakemake(tmp_path, "--configfile", "config/examples/multi-round.yaml")
    results = tmp_path / "results-multi-round"

    table = pd.read_csv(results / "report" / "tables" / "rounds.csv")
    assert sorted(set(table["round"])) == [1, 2, 3]
    assert set(table["condition"]) == {"awm-literal", "reasoningbank"}
    assert set(table["lineage"]) == {"all", "L1", "L2"}
    later = table[table["round"] > 1]
    assert later["d_utility"].notna().all() and (later["n_benign"] > 0).all()
    # ReasoningBank adds each round's memories to the previous bank: the deployed text grows round by
    # round; AWM keeps its previous workflows (a repeated one once), so its length never falls.
    pooled = table[table["lineage"] == "all"].sort_values("round")
    bank = pooled[pooled["condition"] == "reasoningbank"]["artifact_chars"]
    assert bank.is_monotonic_increasing and bank.nunique() == 3
    assert pooled[pooled["condition"] == "awm-literal"]["artifact_chars"].is_monotonic_increasing
    assert table["simulator_notice"].str.contains("mechanism check").all()
    assert (results / "report" / "figures" / "rounds.png").exists()
    assert "rounds.html" in (results / "report" / "html" / "index.html").read_text()

    # The seal: every round's artifact is in its lineage's manifest, written before the unseal event,
    # and every acquisition, of any round, ran on learning variants only.
    unsealed = (results / "freeze" / "unseal.json").stat().st_mtime
    for lineage in ("L1", "L2"):
        listed = {
            e["path"]
            for e in json.loads((results / "freeze" / lineage / "manifest.json").read_text())["entries"]
        }
        for r in (2, 3):
            for m in ("awm", "reasoningbank"):
                meta = results / "rounds" / str(r) / "artifacts" / lineage / m / "meta.json"
                assert f"rounds/{r}/artifacts/{lineage}/{m}/meta.json" in listed
                assert meta.stat().st_mtime <= unsealed
    acquired = [
        *results.glob("acquire/*/rollouts.jsonl"),
        *results.glob("rounds/*/acquire/*/*/rollouts.jsonl"),
    ]
    assert len(acquired) == 2 + 2 * 2 * 2
    variants = {json.loads(line)["variant"] for p in acquired for line in p.read_text().splitlines()}
    assert variants <= set(config_mod.from_dict(example).roles.acquisition)

    # Each round's shards were replayed without a mismatch.
    reports = sorted(results.glob("rounds/*/replay/*/*/*/shard0.json"))
    assert len(reports) == 2 * 2 * 2 * 2
    assert all(json.loads(p.read_text())["mismatched_rollouts"] == 0 for p in reports)
    shutil.rmtree(results / "rounds" / "2" / "evaluate")  # a deleted round shard is redone by a rerun
    assert (
        "evaluate_round"
        in snakemake(tmp_path, "--configfile", "config/examples/multi-round.yaml", "-n").stdout
    )
