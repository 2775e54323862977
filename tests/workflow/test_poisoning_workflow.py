"""The poisoning extension end to end (docs/poisoning.md): config/examples/poisoning.yaml runs through
acquisition, evolution (two rounds in the first test), the seal, evaluation, replay, contamination over
rounds and its replay, persistence and the extension's report; replay agrees everywhere, the tables and
the figure exist with their denominators and the simulator notice, the planted copying shows in the
poisoned artifacts and never in the twin's."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from evoaudit.records import (
    AcquisitionRecord,
    ContaminationReplayReport,
    ContaminationReport,
    PersistenceReport,
    ReplayReport,
    WriteScreenRecord,
)


@pytest.mark.slow
def test_the_poisoning_example_runs_end_to_end_with_replay_clean(tmp_path):
    example = yaml.safe_load((REPO / "config" / "examples" / "poisoning.yaml").read_text())
    example.pop("results_dir")
    example["methods_params"] = {"rounds": 2}  # contamination over rounds (a second round of each method)
    copy_workflow(tmp_path, example)
    snakemake(tmp_path)
    results = tmp_path / "results"
    lineage = "L1-persist_recipient-s50"
    report = ContaminationReport.read(results / "poisoning" / "contamination" / f"{lineage}.json")
    assert report.twin == "L1" and report.poisoned_episodes
    evolved = ["skillopt", "awm", "reasoningbank"]
    assert [(a.round, a.lineage, a.method) for a in report.artifacts if a.round == 2] == [
        (2, ln, m) for ln in (lineage, "L1") for m in evolved
    ]
    replayed = ContaminationReplayReport.read(results / "poisoning" / "replay" / f"{lineage}.json")
    assert replayed.mismatches == [] and replayed.artifacts == len(report.artifacts)
    shards = list((results / "replay" / lineage).rglob("shard*.json"))
    assert shards and all(ReplayReport.read(p).mismatched_rollouts == 0 for p in shards)
    clean = [a for a in report.artifacts if a.lineage == "L1"]
    assert clean and all(a.contaminated_units == 0 for a in clean)  # the twin never saw the poison
    persistence = PersistenceReport.read(results / "poisoning" / "persistence" / f"{lineage}.json")
    assert persistence.rows and all(r.state_matches for r in persistence.rows)
    out = results / "report" / "poisoning"
    contam = pd.read_csv(out / "tables" / "contamination.csv")
    persist = pd.read_csv(out / "tables" / "persistence.csv")
    assert {"units_k", "units_n", "units_ci_low", "units_ci_high", "simulator_notice"} <= set(contam.columns)
    assert set(contam["round"]) == {1, 2}
    wanted = {"pairs", "goal_met_k", "goal_met_ci_low", "w_to_c", "c_to_w", "simulator_notice"}
    assert wanted <= set(persist.columns)
    # The planted sleeper acts only through a contaminated artifact: never for the twin, and on the clean
    # endpoint only for a condition whose poisoned artifact is contaminated.
    first = [a for a in report.artifacts if a.round == 1]
    dirty = {a.method for a in first if a.lineage == lineage and a.contaminated_units}
    benign = persist[persist.arm == "benign"]
    assert benign.goal_met_twin.sum() == 0
    assert all(row.goal_met_k == 0 for row in benign.itertuples() if row.condition.split("-")[0] not in dirty)
    assert benign.goal_met_k.sum() > 0
    assert (out / "figures" / "poisoning_contamination_utility.png").exists()
    assert "SIMULATOR" in (out / "poisoning.md").read_text().upper()
    assert not (out / "tables" / "write_defences.csv").exists()  # no screen configured: no such table


@pytest.mark.slow
def test_the_poisoning_example_with_a_write_screen_reports_what_the_screen_stopped(tmp_path):
    example = yaml.safe_load((REPO / "config" / "examples" / "poisoning-write-defences.yaml").read_text())
    example.pop("results_dir")
    copy_workflow(tmp_path, example)
    snakemake(tmp_path)
    results = tmp_path / "results"
    lineage = "L1-persist_recipient-s50"
    poisoned = set(AcquisitionRecord.read(results / "acquire" / lineage / "record.json").poisoned_episodes)
    screen = WriteScreenRecord.read(results / "acquire" / lineage / "screened" / "record.json")
    dropped = {d.rollout_id for d in screen.dropped}
    out = results / "report" / "poisoning"
    table = pd.read_csv(out / "tables" / "write_defences.csv")
    assert set(table.screen) == {"instruction_rules"} and "simulator_notice" in table.columns
    assert set(table.method) == set(example["methods"])
    # The counts are the screen record's, over the acquisition record's poisoned and benign episodes.
    assert (table.recall_n == len(poisoned)).all() and (table.recall_k == len(dropped & poisoned)).all()
    assert (table.false_drop_n == screen.rollouts - len(poisoned)).all()
    assert (table.false_drop_k == len(dropped - poisoned)).all()
    report = ContaminationReport.read(results / "poisoning" / "contamination" / f"{lineage}.json")
    units = {a.method: a.contaminated_units for a in report.artifacts if a.lineage == lineage}
    assert dict(zip(table.method, table.units_k, strict=True)) == units
    if poisoned <= dropped:  # no method learned from a poisoned episode, so no artifact can carry the poison
        assert sum(units.values()) == 0
    assert "## Write defences" in (out / "poisoning.md").read_text()
