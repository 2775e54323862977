"""Write-path defences in the workflow: the default plan has no screen and evolves from the acquisition
record as before; a configured screen adds one write_screen job per lineage and every evolve job reads
its output; config/examples/write-defences.yaml runs end to end with the seal's chain intact."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from evoaudit.config import from_dict
from evoaudit.hashing import sha256_file
from evoaudit.records import AcquisitionRecord, WriteScreenRecord

EXAMPLE = REPO / "config" / "examples" / "write-defences.yaml"
BILL = {"name": "bill_header", "regex": "Bill for the month of"}


def _plan(stdout: str) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Job counts per rule, and each evolve job's input line, from ``snakemake -n``'s output."""
    table = stdout.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}
    inputs: dict[str, list[str]] = {}
    for block in re.split(r"\n(?=\[[^\n]*\]\nrule )", stdout):
        rule = re.search(r"^rule (\w+):", block, re.M)
        given = re.search(r"^\s+input: (.*)$", block, re.M)
        if rule and given:
            inputs.setdefault(rule.group(1), []).append(given.group(1))
    return counts, inputs


def test_the_default_plan_is_unchanged_and_a_write_screen_adds_one_job_per_lineage(tmp_path):
    default_dir, screened_dir = tmp_path / "default", tmp_path / "screened"
    default_dir.mkdir(), screened_dir.mkdir()
    copy_workflow(default_dir)
    copy_workflow(screened_dir, {"write_defenses": {"screens": ["instruction_rules", "llm_judge"]}})
    default, default_inputs = _plan(snakemake(default_dir, "-n").stdout)
    screened, screened_inputs = _plan(snakemake(screened_dir, "-n").stdout)

    assert "write_screen" not in default
    lineages = default["acquire"]
    assert screened.pop("write_screen") == lineages
    # The rest of the plan is the default one, job for job (counts per rule; the total grows by the screens).
    assert {k: v for k, v in screened.items() if k != "total"} == {
        k: v for k, v in default.items() if k != "total"
    }
    # Evolution reads the acquisition record by default, the screened one with a screen (and both hashes).
    assert len(default_inputs["evolve"]) == default["evolve"]
    assert all("/rollouts.jsonl" in i and "screened" not in i for i in default_inputs["evolve"])
    assert all("acquire/L" in i and "/screened/rollouts.jsonl" in i for i in screened_inputs["evolve"])
    assert all("/screened/record.json" in i for i in screened_inputs["evolve"])


@pytest.mark.slow  # about 2.5 minutes on 2 cores
def test_the_write_defence_example_completes_and_the_seal_holds_the_screened_chain(tmp_path):
    copy_workflow(tmp_path)
    (tmp_path / "config" / "examples").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "config" / "examples" / "write-defences.yaml")
    # An overlay that makes the rule screen drop benign trajectories (the default patterns drop none of this
    # clean run's): one more pattern, on the header of Banking's bills (user_task_0 reads one). A screen
    # that were bypassed would leave the methods learning from every acquired trajectory.
    patterns = [p.model_dump() for p in from_dict({}).write_defenses.instruction_rules.patterns]
    overlay = {"write_defenses": {"instruction_rules": {"patterns": [*patterns, BILL]}}}
    (tmp_path / "config" / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    snakemake(tmp_path, "--configfile", "config/examples/write-defences.yaml", "config/overlay.yaml")
    results = tmp_path / "results-write-defences"

    acquisition = AcquisitionRecord.read(results / "acquire" / "L1" / "record.json")
    screen = WriteScreenRecord.read(results / "acquire" / "L1" / "screened" / "record.json")
    assert screen.source_sha256 == acquisition.sha256
    assert screen.sha256 == sha256_file(results / "acquire" / "L1" / "screened" / "rollouts.jsonl")
    assert screen.rollouts == acquisition.rollouts and screen.kept + len(screen.dropped) == screen.rollouts
    assert 0 < screen.kept < screen.rollouts and screen.sha256 != acquisition.sha256
    assert {d.instance_id.split(".")[0] for d in screen.dropped} == {"user_task_0"}
    assert all("bill_header" in d.flags[0].reason for d in screen.dropped)
    assert screen.screens == ["instruction_rules", "llm_judge"] and set(screen.flagged) == set(screen.screens)
    for method in ("skillopt", "reasoningbank"):
        meta = json.loads((results / "artifacts" / "L1" / method / "meta.json").read_text())
        assert meta["inputs"]["acquisition"] == acquisition.sha256
        assert meta["inputs"]["write_screen"] == screen.sha256
        assert meta["diagnostics"]["write_screen"]["kept"] == screen.kept
        assert meta["diagnostics"]["acquisition_rollouts"] == screen.kept  # it read the kept ones only
    # The freeze and unseal checked the chain (their jobs ran), and the evaluation replays clean.
    manifest = json.loads((results / "freeze" / "manifest.json").read_text())
    assert any(e["path"] == "artifacts/L1/skillopt/meta.json" for e in manifest["entries"])
    assert "rollouts with a mismatch: 0." in (results / "report" / "report.md").read_text()
