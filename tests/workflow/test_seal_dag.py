"""The seal in the DAG Snakemake builds: no job upstream of an unseal event reads the endpoint file."""

from __future__ import annotations

import re

import pytest
from conftest import copy_workflow, snakemake

ENDPOINT = "results/suite/endpoint.parquet"
UNSEAL_RULES = {"unseal", "unseal_lineage"}


def _jobs(dry_run_stdout: str) -> list[dict]:
    """Each job of a dry run: its rule, input files and output files, as Snakemake prints them."""
    jobs = []
    # Jobs of a group (replay) are printed indented inside the group's block.
    for m in re.finditer(r"^ *(?:local)?rule (\w+):\n((?: {4,}\w+: .*\n)*)", dry_run_stdout, re.M):
        fields = dict(re.findall(r"^ +(\w+): (.*)$", m.group(2), re.M))
        jobs.append(
            {
                "rule": m.group(1),
                "input": _files(fields.get("input", "")),
                "output": _files(fields.get("output", "")),
            }
        )
    return jobs


def _files(listing: str) -> set[str]:
    # Flags are printed after the path, e.g. "meta.json (update)" or "manifest.json (ancient)".
    return {re.sub(r" \(\w+\)$", "", f) for f in listing.split(", ") if f}


def _ancestors(jobs: list[dict], targets: list[int]) -> set[int]:
    producer = {f: i for i, j in enumerate(jobs) for f in j["output"]}
    seen: set[int] = set()
    todo = list(targets)
    while todo:
        i = todo.pop()
        for f in jobs[i]["input"]:
            p = producer.get(f)
            if p is not None and p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


@pytest.mark.parametrize("defenses", [[], ["data_marking"]], ids=["undefended", "data_marking"])
@pytest.mark.parametrize("scope", ["global", "lineage"])
def test_no_job_before_unseal_takes_the_endpoint_file_and_every_reader_comes_after_one(
    tmp_path, scope, defenses
):
    # The paper's protocol (no defence), and with a defence (config defenses), which adds
    # evaluate_defended, another reader of the endpoint file.
    over = {"lineages": ["L1", "L2"], "seal": {"seal_scope": scope}, "defenses": defenses}
    copy_workflow(tmp_path, over)
    jobs = _jobs(snakemake(tmp_path, "-n").stdout)
    rules = {j["rule"] for j in jobs}
    assert {"instances", "acquire", "evolve", "placebo", "freeze_lineage", "evaluate"} <= rules

    unseals = [i for i, j in enumerate(jobs) if j["rule"] in UNSEAL_RULES]
    before = _ancestors(jobs, unseals) | set(unseals)
    assert {jobs[i]["rule"] for i in before} >= {"acquire", "evolve", "placebo", "freeze_lineage"}
    readers_before = sorted({jobs[i]["rule"] for i in before if ENDPOINT in jobs[i]["input"]})
    assert readers_before == []

    readers = [i for i, j in enumerate(jobs) if ENDPOINT in j["input"]]
    # The file is read, after unseal.
    expected = {"evaluate", "replay"} | ({"evaluate_defended"} if defenses else set())
    assert {jobs[i]["rule"] for i in readers} >= expected
    assert ("evaluate_defended" in rules) == bool(defenses)
    for i in readers:
        assert any(jobs[a]["rule"] in UNSEAL_RULES for a in _ancestors(jobs, [i])), jobs[i]
    producer = [j for j in jobs if ENDPOINT in j["output"]]
    assert [j["rule"] for j in producer] == ["instances"]


@pytest.mark.parametrize("scope", ["global", "lineage"])
def test_with_three_rounds_no_endpoint_reader_runs_before_its_lineages_last_round_is_frozen(tmp_path, scope):
    # methods_params.rounds (a named extension): the endpoints stay sealed until the last round is frozen.
    over = {"lineages": ["L1", "L2"], "methods_params": {"rounds": 3}, "seal": {"seal_scope": scope}}
    copy_workflow(tmp_path, over)
    jobs = _jobs(snakemake(tmp_path, "-n").stdout)
    unseals = [i for i, j in enumerate(jobs) if j["rule"] in UNSEAL_RULES]
    before = _ancestors(jobs, unseals) | set(unseals)
    assert sorted({jobs[i]["rule"] for i in before if ENDPOINT in jobs[i]["input"]}) == []
    methods = ("skillopt", "awm", "reasoningbank")
    last = {ln: {f"results/rounds/3/artifacts/{ln}/{m}/meta.json" for m in methods} for ln in ("L1", "L2")}
    readers = [i for i, j in enumerate(jobs) if ENDPOINT in j["input"]]
    assert {jobs[i]["rule"] for i in readers} >= {"evaluate", "evaluate_round", "replay"}
    # Rounds × lineages × the conditions deploying an evolved artifact (skillopt, reasoningbank, both AWM
    # insertions; not static or a placebo) × arms.
    assert sum(jobs[i]["rule"] == "evaluate_round" for i in readers) == 2 * 2 * 4 * 2
    for i in readers:
        made = {f for a in _ancestors(jobs, [i]) for f in jobs[a]["output"]}
        touched = {ln for ln in last if any(f"/{ln}/" in f for f in jobs[i]["output"])} or set(last)
        for ln in touched:
            assert last[ln] <= made, (jobs[i]["rule"], ln)
        assert any(jobs[a]["rule"] in UNSEAL_RULES for a in _ancestors(jobs, [i])), jobs[i]


@pytest.mark.parametrize("scope", ["global", "lineage"])
def test_a_poisoned_lineage_is_sealed_like_any_and_its_persistence_reads_the_endpoints_after_unseal(
    tmp_path, scope
):
    # The poisoning extension (docs/poisoning.md): the poisoned twin's acquisition and evolution come before
    # the unseal events, and its endpoint readers (evaluate, replay, persistence) after one.
    over = {
        "lineages": ["L1"],
        "seal": {"seal_scope": scope},
        "poisoning": {"goals": ["persist_recipient"], "shares": [0.25]},
    }
    copy_workflow(tmp_path, over)
    jobs = _jobs(snakemake(tmp_path, "-n").stdout)
    poisoned = "L1-persist_recipient-s25"
    unseals = [i for i, j in enumerate(jobs) if j["rule"] in UNSEAL_RULES]
    before = _ancestors(jobs, unseals) | set(unseals)
    early = {f for i in before for f in jobs[i]["output"]}
    assert f"results/acquire/{poisoned}/record.json" in early
    assert f"results/artifacts/{poisoned}/skillopt/meta.json" in early
    assert not [jobs[i]["rule"] for i in before if ENDPOINT in jobs[i]["input"]]
    readers = [i for i, j in enumerate(jobs) if ENDPOINT in j["input"]]
    assert {"evaluate", "replay", "persistence"} <= {jobs[i]["rule"] for i in readers}
    for i in readers:
        assert any(jobs[a]["rule"] in UNSEAL_RULES for a in _ancestors(jobs, [i])), jobs[i]
