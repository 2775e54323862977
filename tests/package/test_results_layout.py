"""The results layout is spelled once (evoaudit.paths), and the rules use it rather than spelling paths."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from evoaudit.paths import RELATIVE, Layout

ROOT = Path(__file__).resolve().parents[2]
RULE_FILES = sorted((ROOT / "workflow" / "rules").glob("*.smk")) + [ROOT / "Snakefile"]


def test_layout_pins_every_stage_path():
    # What a run writes where: a change here moves results a reader, a bundle or a resumed run looks for.
    lay = Layout.at("res/", worlds="res/suite/apex")
    assert lay.root == "res"
    assert Layout.at("res").worlds == "res/suite/apex"  # suite.apex.out's default
    assert lay.resolved_config() == "res/config/config.json"
    assert lay.log("evaluate/L1/static/benign/shard0") == "res/logs/evaluate/L1/static/benign/shard0.log"
    assert lay.benchmark("report") == "res/benchmarks/report.tsv"
    assert lay.suite("suite_spec.json") == "res/suite/suite_spec.json"
    assert lay.extra_suite("slack", "checker_audit.csv") == "res/suites/slack/checker_audit.csv"
    assert lay.acquire("L1", "rollouts.jsonl") == "res/acquire/L1/rollouts.jsonl"
    assert (
        lay.acquire("L1", "record.json", round=2, method="awm") == "res/rounds/2/acquire/L1/awm/record.json"
    )
    assert lay.artifact("L1", "skillopt") == "res/artifacts/L1/skillopt"
    assert lay.artifact("L1", "skillopt", round=1) == "res/artifacts/L1/skillopt"  # round 1 is the protocol's
    assert lay.artifact_meta("L1", "awm", round=3) == "res/rounds/3/artifacts/L1/awm/meta.json"
    assert lay.freeze("unseal.json") == "res/freeze/unseal.json"
    assert lay.freeze("manifest.json", "L2") == "res/freeze/L2/manifest.json"
    assert (
        lay.evaluate_shard("L1", "awm-literal", "attacked", 3)
        == "res/evaluate/L1/awm-literal/attacked/shard3.jsonl"
    )
    assert (
        lay.evaluate_shard("L1", "static", "benign", 0, defense="data_marking")
        == "res/defense/data_marking/evaluate/L1/static/benign/shard0.jsonl"
    )
    assert (
        lay.evaluate_shard("L1", "awm", "benign", 0, round=2)
        == "res/rounds/2/evaluate/L1/awm/benign/shard0.jsonl"
    )
    assert (
        lay.replay_report("L1", "static", "benign", 0, round=2)
        == "res/rounds/2/replay/L1/static/benign/shard0.json"
    )
    assert lay.replay_of(lay.evaluate_shard("L1", "c", "a", 1, defense="d")) == lay.replay_report(
        "L1", "c", "a", 1, defense="d"
    )
    assert lay.verify_report() == "res/verify/verify.json"
    assert lay.transfer("config.json") == "res/transfer/config.json"
    assert lay.transfer_shard("L1", "skillopt") == "res/transfer/evaluate/L1/skillopt/attacked/shard0.jsonl"
    assert lay.report_table("main") == "res/report/tables/main.csv"
    assert lay.report("html", "index.html") == "res/report/html/index.html"
    assert lay.export("inspect") == "res/export/inspect"
    assert lay.apex_world("apex_spec.json") == "res/suite/apex/apex_spec.json"
    assert lay.apex_attacks(Layout.ablation_arm("hidden")) == "res/suite/apex/ablations/hidden/attacks.json"
    assert lay.apex_shard("sim", "attacked/c1", 0) == "res/apex/runs/sim/attacked/c1/shard0.jsonl"
    assert (
        lay.apex_shard("sim", "benign", 1, "ablations/timer/")
        == "res/apex/ablations/timer/runs/sim/benign/shard1.jsonl"
    )
    assert (
        lay.apex_shard("sim", "benign", 0, defense="d") == "res/apex/defense/d/runs/sim/benign/shard0.jsonl"
    )
    assert lay.apex_replay_of(lay.apex_shard("sim", "benign", 0, defense="d")) == lay.apex_replay(
        "sim", "benign", 0, defense="d"
    )
    assert lay.apex_judge("sim", "ablations/timer/") == "res/apex/ablations/timer/judge/sim.json"
    assert lay.apex_instances() == "res/apex/instances.parquet"
    assert lay.apex_report("tables", "apex_main.csv") == "res/apex/report/tables/apex_main.csv"
    # Relative to any results directory, and wildcards pass through untouched.
    assert RELATIVE.evaluate_shard("*", "*", "*", "*") == "evaluate/*/*/*/shard*.jsonl"
    assert Layout.at("r").evaluate_shard("{lineage}", "{condition}", "{arm}", "{shard}") == (
        "r/evaluate/{lineage}/{condition}/{arm}/shard{shard}.jsonl"
    )


def test_layout_refuses_what_has_no_place():
    with pytest.raises(ValueError, match="not both"):
        RELATIVE.evaluate_shard("L1", "c", "a", 0, defense="d", round=2)
    with pytest.raises(ValueError, match="not a shard"):
        Layout.replay_of("results/report/report.md")


# A results path's directory piece, or the old ways of joining one onto the results directory.
_SPELLED = re.compile(
    r"(^|/)(suite|suites|acquire|artifacts|freeze|evaluate|replay|verify|transfer|report|export|logs|"
    r"benchmarks|apex|defense|rounds|runs|judge|ablations)/|\{RESULTS\}|\{APEX\}|apex\.out\}"
)


def _spelled_paths(text: str) -> list[tuple[int, str]]:
    """(line, string) of every string literal in a rule file that spells a results path itself. A job's log
    and timing key (the argument of LAYOUT.log / LAYOUT.benchmark) and a path relative to the rule file
    (``../``) are not results paths."""
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    found = []
    for i, tok in enumerate(toks):
        if tok.type != tokenize.STRING:
            continue
        body = re.sub(r"^[rbfuRBFU]*(\"\"\"|'''|\"|')", "", tok.string)
        if [t.string for t in toks[max(0, i - 4) : i]] in (
            ["LAYOUT", ".", "log", "("],
            ["LAYOUT", ".", "benchmark", "("],
        ):
            continue
        if not body.startswith("../") and _SPELLED.search(body):
            found.append((tok.start[0], tok.string))
    return found


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_rule_files_spell_no_results_path(path):
    assert _spelled_paths(path.read_text(encoding="utf-8")) == []


def test_the_rule_file_check_catches_a_spelled_path():
    # The check itself: the spellings the rules used before the layout had one home are caught.
    rule = 'rule x:\n    output:\n        f"{RESULTS}/evaluate/{{lineage}}/shard{{shard}}.jsonl",\n'
    assert [line for line, _ in _spelled_paths(rule)] == [3]
    assert _spelled_paths('X = p.replace("/runs/", "/replay/")\n') != []
    assert _spelled_paths('LAYOUT.log("apex/defense/{defense}/judge/{model}")\n') == []
