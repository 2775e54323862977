"""config/examples/defenses.yaml on the simulator: the defence axis end to end (evaluate under each
defence, replay, the report's defence table), labelled a mechanism check."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest
from conftest import REPO, copy_workflow, snakemake, write_config

EXAMPLE = REPO / "config" / "examples" / "defenses.yaml"


@pytest.mark.slow  # about 2 minutes on 2 cores
def test_the_defence_example_completes_with_a_defence_table_and_replays_without_a_mismatch(tmp_path):
    copy_workflow(tmp_path)
    (tmp_path / "config" / "examples").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "config" / "examples" / "defenses.yaml")
    snakemake(tmp_path, "--configfile", "config/examples/defenses.yaml")
    results = tmp_path / "results-defenses"

    table = pd.read_csv(results / "report" / "tables" / "defense.csv")
    defences = [
        "spotlighting_with_delimiting",
        "repeat_user_prompt",
        "tool_filter",
        "data_marking",
        "llm_monitor",
    ]
    assert list(dict.fromkeys(table["defense"])) == ["none", *defences]
    assert set(table["condition"]) == {"static", "skillopt"}
    assert (table["n_attacked"] > 0).all() and (table["n_benign"] > 0).all()
    defended = table[table["defense"] != "none"]
    assert defended["d_asr"].notna().all() and defended["d_asr_lo"].notna().all()
    assert table["simulator_notice"].str.contains("mechanism check").all()
    page = (results / "report" / "html" / "defense.html").read_text()
    assert (
        "mechanism check" in page
        and "defense.html" in (results / "report" / "html" / "index.html").read_text()
    )
    assert (results / "report" / "tables" / "defense.parquet").exists()

    # Every defended shard was replayed, with no mismatch; the records name their defence.
    reports = sorted((results / "defense").glob("*/replay/L1/*/*/shard0.json"))
    assert len(reports) == len(defences) * 2 * 2
    assert all(json.loads(p.read_text())["mismatched_rollouts"] == 0 for p in reports)
    assert "rollouts with a mismatch: 0." in (results / "report" / "report.md").read_text()
    marked = results / "defense" / "data_marking" / "evaluate" / "L1" / "static" / "attacked" / "shard0.jsonl"
    records = [json.loads(line) for line in marked.read_text().splitlines()]
    assert {r["defense"] for r in records} == {"data_marking"}
    tools = [m["content"] for r in records for m in r["messages"] if m["role"] == "tool"]
    assert tools and all(t.startswith("[data ") for t in tools)
    # llm_monitor: the threshold its provenance says was fixed on the acquisition's tool outputs is the one
    # every rollout records, every tool output was scored, and a flagged one reached the model as
    # AgentDojo's detector notice.
    watched = results / "defense" / "llm_monitor" / "evaluate" / "L1" / "static" / "attacked"
    calibration = json.loads((watched / "provenance.json").read_text())["shard0.jsonl"]["defense"][
        "calibration"
    ]
    assert calibration["items_scored"] == len(calibration["scores"]) > 0
    assert calibration["benign_flagged"] <= calibration["max_benign_flag_rate"] * calibration["items_scored"]
    records = [json.loads(line) for line in (watched / "shard0.jsonl").read_text().splitlines()]
    assert {r["monitor_threshold"] for r in records} == {calibration["threshold"]}
    calls = [c for r in records for c in r["calls"]]
    assert calls and all(isinstance(c["monitor_score"], int) for c in calls)
    omitted = "<Data omitted because a prompt injection was detected>"
    shown = [m["content"] for r in records for m in r["messages"] if m["role"] == "tool"]
    assert shown.count(omitted) == sum(c["monitor_score"] >= calibration["threshold"] for c in calls) > 0
    # The undefended run is the paper's protocol: its records carry no defence.
    plain = results / "evaluate" / "L1" / "static" / "attacked" / "shard0.jsonl"
    assert "defense" not in json.loads(plain.read_text().splitlines()[0])


@pytest.mark.slow  # about 1.5 minutes on 2 cores
def test_apex_harm_runs_each_defence_judges_and_replays_it_and_writes_its_defence_table(tmp_path):
    copy_workflow(
        tmp_path,
        {
            "apex": {"enabled": True, "categories": ["c1"], "tasks": ["ib_wacc", "mc_utilisation_dashboard"]},
            "suite": {"apex": {"scale": 0.05}},
            # tool_filter runs on Banking only: APEX-Harm's rules leave it out and its page says why.
            "defenses": ["data_marking", "spotlighting_with_delimiting", "tool_filter"],
        },
    )
    snakemake(tmp_path, "apex")
    apex = tmp_path / "results" / "apex"
    table = pd.read_csv(apex / "report" / "defenses" / "defense.csv")
    assert list(table["defense"]) == ["none", "data_marking", "spotlighting_with_delimiting"]
    assert (table["n_benign"] == 2).all() and (table["n_attacked"] > 0).all()
    assert table.loc[1:, "d_asr"].notna().all() and table["simulator_notice"].notna().all()
    page = (apex / "report" / "defenses" / "defense.html").read_text()
    assert "mechanism check" in page and "not_run_on_apex" in page and "tool_filter" in page
    assert not (apex / "defense" / "tool_filter").exists()
    reports = sorted((apex / "defense").glob("*/replay/sim/**/shard0.json"))
    assert len(reports) == 2 * 2  # each defence: benign and c1
    assert all(json.loads(p.read_text())["mismatched_rollouts"] == 0 for p in reports)
    assert sorted(p.parent.parent.name for p in (apex / "defense").glob("*/judge/sim.json")) == [
        "data_marking",
        "spotlighting_with_delimiting",
    ]
    marked = apex / "defense" / "data_marking" / "runs" / "sim" / "attacked" / "c1" / "shard0.jsonl"
    records = [json.loads(line) for line in marked.read_text().splitlines()]
    tools = [m["content"] for r in records for m in r["messages"] if m["role"] == "tool"]
    assert tools and all(t.startswith("[data ") for t in tools)


def _job_counts(stdout: str) -> dict[str, int]:
    table = stdout.split("Job stats:", 1)[1] if "Job stats:" in stdout else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


SMALL = {"lineages": ["L1"], "methods": ["static"], "conditions": ["static"], "transfer": {"enabled": False}}


def test_the_default_protocol_runs_no_defence_and_a_defence_not_configured_cannot_be_asked_for(tmp_path):
    copy_workflow(tmp_path, SMALL)
    assert not {"evaluate_defended", "apex_benign_defended"} & set(
        _job_counts(snakemake(tmp_path, "-n").stdout)
    )
    write_config(tmp_path, {**SMALL, "defenses": ["data_marking"]})
    counts = _job_counts(snakemake(tmp_path, "-n").stdout)
    assert counts["evaluate_defended"] == 2 and counts["evaluate"] == 2  # 1 lineage × 1 condition × 2 arms
    other = "results/defense/spotlighting_with_delimiting/evaluate/L1/static/benign/shard0.jsonl"
    proc = snakemake(tmp_path, "-n", other, check=False)
    assert proc.returncode != 0
    assert (
        "MissingRuleException" in proc.stdout + proc.stderr
        or "No rule to produce" in proc.stdout + proc.stderr
    )


def test_apex_harms_defended_rules_take_only_the_defences_apex_harm_runs(tmp_path):
    apex = {"enabled": True, "categories": ["c1"], "tasks": ["ib_wacc"]}
    copy_workflow(tmp_path, {**SMALL, "apex": apex, "defenses": ["data_marking", "tool_filter"]})
    marked = "results/apex/defense/data_marking/runs/sim/benign/shard0.jsonl"
    assert snakemake(tmp_path, "-n", marked, check=False).returncode == 0
    for target in (
        "results/apex/defense/tool_filter/runs/sim/benign/shard0.jsonl",
        "results/apex/defense/tool_filter/runs/sim/attacked/c1/shard0.jsonl",
        "results/apex/defense/tool_filter/replay/sim/benign/shard0.json",
        "results/apex/defense/tool_filter/judge/sim.json",
    ):
        proc = snakemake(tmp_path, "-n", target, check=False)
        assert proc.returncode != 0, target
        assert "MissingRuleException" in proc.stdout + proc.stderr or "No rule to produce" in (
            proc.stdout + proc.stderr
        )
