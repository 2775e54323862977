"""The APEX worlds stage: a spec that pins the built worlds, and the ``apex_worlds`` rule kept apart from the
Banking audit."""

from __future__ import annotations

import json
import re

import pytest
from conftest import copy_workflow, snakemake

from evoaudit import config as config_mod
from evoaudit.config import suite_view
from evoaudit.suite.apex.adapter import ApexSuite
from evoaudit.suite.apex.stage import build_worlds
from evoaudit.suite.apex.worlds.generate import TASK_IDS

SCALE = 0.05


# One task per domain (banking, law, consulting): the build of all of them is the slow workflow test's.
TASKS = [next(t for t in TASK_IDS if t.startswith(d)) for d in ("ib_", "law_", "mc_")]


def _cfg(out, **apex):
    return config_mod.from_dict(
        {"suite": {"apex": {"scale": SCALE, "out": str(out), **apex}}, "apex": {"tasks": TASKS}},
        "test config",
    )


def test_two_builds_from_scratch_write_the_same_spec_which_pins_every_world(tmp_path):
    specs = []
    for name in ("a", "b"):
        out = tmp_path / name
        build_worlds(_cfg(out), out / "apex_manifest.json", out / "apex_spec.json")
        specs.append((out / "apex_spec.json").read_bytes())
    assert specs[0] == specs[1]
    spec = json.loads(specs[0])
    manifest = json.loads((tmp_path / "a" / "apex_manifest.json").read_text())
    assert spec["task_ids"] == TASKS and spec["scale"] == SCALE and spec["variants"] == ["v0"]
    for entry in manifest["v0"]["tasks"]:
        pinned = spec["worlds"]["v0"][entry["task_id"]]
        assert pinned["world_sha256"] == entry["world_sha256"]
        assert pinned["plan_sha256"] == entry["plan_sha256"]
    provenance = json.loads((tmp_path / "a" / "provenance.json").read_text())
    assert provenance["apex_spec.json"]["apex_spec_sha256"] == spec["sha256"]
    # The instances read the same cache.
    assert len(ApexSuite().build_instances(suite_view(_cfg(tmp_path / "a")))) == len(TASKS)


def _jobs(stdout: str) -> set[str]:
    table = stdout.split("Job stats:", 1)[1] if "Job stats:" in stdout else ""
    return {m.group(1) for m in re.finditer(r"^(\w+)\s+\d+$", table, re.M)} - {"total"}


def test_the_default_target_does_not_build_apex_worlds(tmp_path):
    # With the APEX audit switched off; when on (the default), its report needs the worlds.
    copy_workflow(tmp_path, {"apex": {"enabled": False}})
    assert "apex_worlds" not in _jobs(snakemake(tmp_path, "-n").stdout)


@pytest.mark.slow
def test_apex_worlds_rule_builds_the_worlds_and_a_rerun_does_nothing(tmp_path):
    copy_workflow(tmp_path, {"suite": {"apex": {"scale": SCALE}}})
    # Its own target: no Banking job runs before or with it.
    run = snakemake(tmp_path, "apex_worlds")
    assert _jobs(run.stdout + run.stderr) == {"apex_worlds"}
    spec = json.loads((tmp_path / "results/suite/apex/apex_spec.json").read_text())
    assert sorted(spec["worlds"]["v0"]) == sorted(TASK_IDS)
    assert (tmp_path / "results/benchmarks/apex_worlds.tsv").exists()
    again = snakemake(tmp_path, "apex_worlds")
    assert "Nothing to be done" in again.stdout + again.stderr
