"""The Banking audit's report tables are pinned byte for byte on a reduced config.

Every method, the awm insertion transforms, a placebo and the transfer check run on one lineage and two
injection goals (about 40 s on 2 cores); each ``results/report/tables/*.csv`` must hash to the line kept
in ``tests/data/banking_reduced_tables.sha256``. A refactor of the suite layer (or anything below the
report) that moves one byte of a Banking table fails here. On the same run, an independent recomputation
from the raw shard records (``benchmarks/recompute_banking.py``) must match every table cell it recomputes.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import copy_workflow, snakemake

from evoaudit import config as config_mod

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "banking_reduced_tables.sha256"

REDUCED = {
    "lineages": ["L1"],
    "methods": ["static", "skillopt", "awm", "reasoningbank"],
    "conditions": ["static", "skillopt", "reasoningbank", "awm-literal", "awm-adapted", "placebo-skillopt"],
    "suite": {"goals": ["injection_task_4", "injection_task_6"]},
    "methods_params": {"placebo": {"goals": ["injection_task_4"]}},
    "transfer": {"conditions": ["static", "skillopt"], "goals": ["injection_task_4"], "variants": ["v3"]},
    "report": {"bootstrap": {"replicates": 200}, "figures": False},
    "apex": {"enabled": False},  # the Banking audit alone (its settings exclude the apex section)
}


def _golden() -> dict[str, str]:
    rows = [line.split() for line in GOLDEN.read_text().splitlines() if line and not line.startswith("#")]
    return {name: digest for digest, name in rows}


def test_golden_list_names_every_table_once():
    golden = _golden()
    assert len(golden) == 11
    assert all(len(d) == 64 and name.endswith(".csv") for name, d in golden.items())


@pytest.fixture(scope="module")
def reduced_run(tmp_path_factory):
    """One run of the reduced config, shared by the tests below."""
    workdir = tmp_path_factory.mktemp("reduced")
    copy_workflow(workdir, REDUCED)
    snakemake(workdir)
    return workdir


@pytest.mark.slow
def test_banking_tables_are_byte_identical_on_the_reduced_config(reduced_run):
    tables = reduced_run / "results" / "report" / "tables"
    produced = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(tables.glob("*.csv"))}
    golden = _golden()
    assert sorted(produced) == sorted(golden), "the set of report tables changed"
    changed = sorted(name for name in golden if produced[name] != golden[name])
    assert not changed, f"Banking report tables changed: {changed}"


@pytest.mark.slow
def test_a_bundle_reproduces_every_replay_report_table_and_page_byte_for_byte(reduced_run, tmp_path):
    from evoaudit.ops.bundle import reproduce, write_bundle

    cfg = config_mod.load(reduced_run / "config" / "config.yaml")
    manifest = write_bundle(cfg, reduced_run / "results", tmp_path / "bundle.tar.gz")
    derived = [e.path for e in manifest.entries if e.role == "derived"]
    assert any(p.startswith("results/replay/") for p in derived)
    assert "results/report/tables/main.csv" in derived and "results/report/report.md" in derived
    report = reproduce(tmp_path / "bundle.tar.gz", tmp_path / "work", reduced_run / "Snakefile", cores=2)
    not_identical = [(c.status, c.path) for c in report.files if c.status != "identical"]
    assert not not_identical and report.identical == len(derived)
    # Rebuilt, not copied: the derived files were absent before the rebuild and are there now.
    assert (tmp_path / "work" / "results" / "logs" / "report.log").exists()


@pytest.mark.slow
def test_a_second_config_in_its_own_results_dir_leaves_the_first_run_as_it_was(reduced_run):
    first = reduced_run / "results"
    before = {p: p.read_bytes() for p in sorted(first.rglob("*")) if p.is_file()}
    other = reduced_run / "cues-off.yaml"
    other.write_text(
        "results_dir: results-cues-off\nsim: {cues: {follow_tool_text: 0.0, distrust_tool_text: 0.0}}\n"
    )
    snakemake(reduced_run, "--configfile", str(other))
    assert (reduced_run / "results-cues-off" / "report" / "tables" / "main.csv").exists()
    assert (reduced_run / "results-cues-off" / "freeze" / "unseal.json").exists()  # its own seal
    again = snakemake(reduced_run, "-n")  # the first configuration: nothing to redo, nothing refused
    assert "Nothing to be done" in again.stdout + again.stderr
    after = {p: p.read_bytes() for p in sorted(first.rglob("*")) if p.is_file()}
    assert after == before


# Every table the reduced run writes is recomputed cell for cell (retrieval because ReasoningBank's episodes
# record what they retrieved); the only columns left are the bootstrap intervals, the two tests' p-values
# and the simulator notice.
RECOMPUTED = {
    "main", "per_goal", "lineage", "harm", "interface", "sensitivity", "placebo", "retrieval", "transfer",
    "qualitative", "diagnostics",
}  # fmt: skip
NOT_RECOMPUTED = re.compile(r"(_lo|_hi)$|^p_mcnemar$|^p_family_signflip$|^simulator_notice$")
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "recompute_banking.py"


def _recompute(results: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    proc = subprocess.run([sys.executable, str(SCRIPT), str(results), *args], capture_output=True, text=True)
    return proc, json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.slow
def test_every_banking_table_recomputed_from_the_shard_records_matches_cell_for_cell(reduced_run):
    # benchmarks/recompute_banking.py: its own arithmetic on the raw records, AgentDojo's security checker
    # for attack success; a differing cell makes it print DIFF and exit 1.
    proc, summary = _recompute(reduced_run / "results")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert summary["mismatches"] == 0 and summary["rejudge_disagreements"] == 0
    tables = summary["tables"]
    assert set(tables) == RECOMPUTED, summary["not_recomputed"]
    produced = {p.stem for p in (reduced_run / "results" / "report" / "tables").glob("*.csv")}
    assert produced == RECOMPUTED, "a report table the recomputation does not cover"
    for name, figures in tables.items():
        assert figures["mismatches"] == 0 and figures["cells"] > 0, (name, figures)
        left = [c for c in figures["uncompared_columns"] if not NOT_RECOMPUTED.search(c)]
        assert not left, f"{name}: columns nothing recomputed: {left}"
    assert set(summary["columns_matched"]) == set(REDUCED["conditions"])
    for column in ("utility", "utility_under_attack", "net", "net_rate", "exposure", "casr", "asr", "unauth"):
        assert column in summary["columns"]
    judged = summary["rejudge"]
    assert judged["attack_success.judged"] == judged["exposed.judged"] > 0


@pytest.mark.slow
def test_a_changed_cell_of_a_table_other_than_main_is_named_by_the_recomputation(reduced_run, tmp_path):
    tables = tmp_path / "tables"
    shutil.copytree(reduced_run / "results" / "report" / "tables", tables)
    harm = tables / "harm.csv"
    with open(harm, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    true = rows[0]["asr_state"]
    rows[0]["asr_state"] = f"{float(true) + 0.01:.6f}"
    with open(harm, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    proc, summary = _recompute(reduced_run / "results", "--tables", str(tables), "--no-rejudge")
    assert proc.returncode == 1
    assert [line for line in proc.stdout.splitlines() if line.startswith("DIFF")] == [
        f"DIFF harm[{rows[0]['condition']}].asr_state: harm.csv {rows[0]['asr_state']!r}, recomputed {true}"
    ]
    assert summary["tables"]["harm"]["mismatches"] == 1 and summary["mismatches"] == 1
