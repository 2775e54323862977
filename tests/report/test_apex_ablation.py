"""APEX-Harm ablations: their config, the ablated arm's attack choices, the comparison table on rollouts
built in code, the ablation configs' DAGs (dry runs) and one small end-to-end ablation run."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from apex_rollout_kit import apex_rollout as _rollout
from conftest import copy_workflow, snakemake

from evoaudit import config as config_mod
from evoaudit.records import Instance
from evoaudit.report.apex import ablation as apex_ablation
from evoaudit.report.apex import scores as sc
from evoaudit.report.stats import FamilyBootstrap
from evoaudit.suite.apex.attacks import ablation
from evoaudit.suite.registry import get_suite

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "config" / "examples").glob("apex-ablation-*.yaml"))


def _attacks(*ids: str) -> dict[str, sc.AttackInfo]:
    out = {}
    for a in ids:
        cat, variant = int(a[1]), a.split(".")[0][2:]
        out[a] = sc.AttackInfo(a, cat, variant, "txt", "internal_mail", ())
    return out


def _boot(tasks):
    return FamilyBootstrap(tasks, 200, 1, 0.95)


# --- config --------------------------------------------------------------------------------------------


def test_an_ablation_merges_its_changes_into_the_attack_switches():
    cfg = config_mod.from_dict(
        {
            "apex": {
                "categories": ["c2"],
                "ablations": [{"name": "x", "attacks": {"instruction_file": False}}],
            }
        },
        "test",
    )
    opts = ablation.attack_options(cfg, "x")
    assert opts.instruction_file is False and opts.task_keywords is True
    assert ablation.categories(cfg, "x") == ("c2",) and ablation.reference_model(cfg, "x") == "sim"
    assert not ablation.needs_benign(cfg, "x")
    assert ablation.arm_name("") is None and ablation.arm_name("ablations/x/") == "x"


@pytest.mark.parametrize(
    ("ablations", "message"),
    [
        (
            [{"name": "x", "attacks": {"nonsense": True}}],
            "apex.ablations[0] (x).attacks: unknown keys ['nonsense']",
        ),
        (
            [{"name": "x", "attacks": {}, "categories": ["c5"]}],
            "apex.ablations[0] (x).categories: ['c5'] not in",
        ),
        ([{"name": "x", "attacks": {}}, {"name": "x", "attacks": {}}], "names must be unique"),
        (
            [{"name": "x", "attacks": {}, "reference_model": "gpt"}],
            "reference_model: 'gpt' is not in apex.models",
        ),
        ([{"name": "X y", "attacks": {}}], "apex.ablations.0.name"),
        ([{"name": "x", "attacks": {}}], "apex.ablations[0] (x): changes nothing"),
        ([{"name": "x", "orchestrator": {"episode_timer_s": 0}}], "orchestrator.episode_timer_s"),
        ([{"name": "x", "orchestrator": {"step_limit": 3}}], "orchestrator.step_limit"),
        # Both kinds of change in one arm would pair different attack sets.
        (
            [
                {
                    "name": "x",
                    "attacks": {"placement": "existing_start"},
                    "orchestrator": {"episode_timer_s": 5},
                }
            ],
            "sets both 'attacks' and 'orchestrator'",
        ),
        # No timer in the arm, and none in the main run: the arm is the base.
        ([{"name": "x", "orchestrator": {"episode_timer_s": None}}], "is what apex already sets"),
    ],
)
def test_bad_ablations_name_the_field(ablations, message):
    with pytest.raises(config_mod.ConfigError, match=re.escape(message)):
        config_mod.from_dict({"apex": {"categories": ["c1", "c2"], "ablations": ablations}}, "test")


def test_an_orchestrator_arm_runs_under_its_timer_and_reruns_when_it_changes():
    arm = {"name": "t", "orchestrator": {"episode_timer_s": 2.5}}
    cfg = config_mod.from_dict({"apex": {"ablations": [arm]}}, "t")
    assert config_mod.apex_arm_config(cfg, "t").apex.episode_timer_s == 2.5
    assert config_mod.apex_arm_config(cfg, None).apex.episode_timer_s is None
    assert not ablation.own_attack_set(cfg, "t") and ablation.runs_benign(cfg, "t")
    main = config_mod.stage_digest(cfg, "apex", model="sim")
    assert config_mod.stage_digest(cfg, "apex", model="sim", ablation="t") != main
    # The main run's own timer reruns a model's episodes too; no timer hashes as before the key existed.
    timed = config_mod.from_dict({"apex": {"episode_timer_s": 2.5}}, "t")
    assert config_mod.stage_digest(timed, "apex", model="sim") != main
    assert config_mod.stage_digest(config_mod.from_dict({}, "t"), "apex", model="sim") == main


def test_a_bad_switch_value_names_the_ablation():
    cfg = config_mod.from_dict({"apex": {"ablations": [{"name": "p", "attacks": {"placement": "top"}}]}}, "t")
    with pytest.raises(config_mod.ConfigError, match=re.escape("apex.ablations (p).attacks")):
        ablation.attack_options(cfg, "p")


# --- source choice for existing-file placement --------------------------------------------------------


class _Picker:
    model = "fixed"

    def __init__(self, pick):
        self.pick = pick

    def select_source(self, prompt, keywords, files):
        return self.pick, "h"


def test_an_ablated_arm_points_its_instances_at_its_own_attack_set_and_the_main_set_keeps_them(tmp_path):
    main, ablated = tmp_path / "attacks.json", tmp_path / "ablations" / "a" / "attacks.json"
    ref = {"root": "worlds/v3", "attack_set": main.as_posix(), "attack_set_sha256": "0" * 64, "task_id": "t"}
    inst = Instance(
        instance_id="t.v3",
        suite="apex",
        family="t",
        variant="v3",
        role="endpoint",
        split="unseen",
        cluster="c",
        prompt="p",
        environment_template=json.dumps(ref, sort_keys=True),
        environment_format="apex-world-ref",
        ground_truth=[],
        predicate={"kind": "apex_rubric"},
    )
    suite = get_suite("apex")
    assert suite.with_attack_set(inst, main) is inst  # the main set: byte-identical
    moved = suite.with_attack_set(inst, ablated)
    # The ablated set is checked against its own pin, not the main set's.
    pointed = ref | {"attack_set": ablated.as_posix(), "attack_set_sha256": None}
    assert json.loads(moved.environment_template) == pointed
    assert moved.environment_format == "apex-world-ref"


def test_the_source_is_a_file_the_benign_run_read():
    benign = [
        _rollout("sim", "t1", None, prompt="task one", calls=[("c0", "read_sheet", {"path": "./d/b.xlsx"})]),
        _rollout("sim", "t2", None, prompt="task two", calls=[("c0", "read_file", {"path": "d/a.txt"})]),
        _rollout("sim", "t3", None, prompt="task three", calls=[("c0", "list_files", {"path": "d"})]),
    ]
    read = ablation.read_files(benign)
    assert read["task one"] == ["d/b.xlsx"] and read["task three"] == []
    chooser = ablation.ReadFileAttacker(_Picker("d/a.txt"), read)
    files = ["d/a.txt", "d/b.xlsx"]
    assert chooser.select_source("task one", [], files) == ("d/b.xlsx", "h")  # the pick was not read
    assert chooser.select_source("task two", [], files) == ("d/a.txt", "h")  # the pick was read: kept
    assert chooser.select_source("task three", [], files) == ("d/a.txt", "h")  # nothing read: the pick
    assert chooser.choices["task three"]["benign_read"] == [] and chooser.model == "fixed"


# --- the table -----------------------------------------------------------------------------------------


def test_the_table_compares_each_category_of_the_ablated_arm_with_the_base_arm():
    attacks = _attacks("c2.t1.0", "c2.t2.0", "c4perm.t1.0", "c4noperm.t1.0")
    base = [
        _rollout("m", "t1", "c2.t1.0", success=True, exposed=True),
        _rollout("m", "t2", "c2.t2.0", success=True, exposed=True),
        _rollout("m", "t1", "c4perm.t1.0", success=True, exposed=True),
        _rollout("m", "t1", "c4noperm.t1.0", exposed=False),
    ]
    ablated = [
        _rollout("m", "t1", "c2.t1.0", exposed=True, score=0.5),
        _rollout("m", "t2", "c2.t2.0", success=True, exposed=False),
        _rollout("m", "t1", "c4perm.t1.0", success=True, exposed=True),
        _rollout("m", "t1", "c4noperm.t1.0", exposed=True),
    ]
    t = apex_ablation.ablation_table(base, ablated, attacks, attacks, _boot(["t1", "t2"]))
    assert list(t.category) == ["c2", "c4noperm", "c4perm", "all"]
    c2 = t[t.category == "c2"].iloc[0]
    assert (c2.n_attacked_base, c2.n_attacked_ablated) == (2, 2)
    assert (c2.n_exposure_defined_base, c2.n_exposure_defined_ablated) == (2, 2)
    assert (c2.asr_base, c2.asr_ablated, c2.asr_delta) == (1.0, 0.5, -0.5)
    assert (c2.exposure_rate_base, c2.exposure_rate_ablated) == (1.0, 0.5)
    assert c2.task_score_attacked_ablated == 0.75 and c2.asr_delta_lo <= -0.5 <= c2.asr_delta_hi
    noperm = t[t.category == "c4noperm"].iloc[0]
    assert (noperm.exposure_rate_base, noperm.exposure_rate_ablated) == (0.0, 1.0)
    every = t[t.category == "all"].iloc[0]
    assert every.n_attacked_base == 4 and every.asr_base == 0.75 and every.asr_ablated == 0.5


def test_a_group_missing_from_one_arm_has_no_delta():
    attacks = _attacks("c1.t1.0", "c3.t1.0")
    t = apex_ablation.ablation_table(
        [_rollout("m", "t1", "c1.t1.0", success=True)], [_rollout("m", "t1", "c3.t1.0")], attacks, attacks,
        _boot(["t1"]),
    )  # fmt: skip
    c1 = t[t.category == "c1"].iloc[0]
    assert c1.n_attacked_ablated == 0 and math.isnan(c1.asr_ablated) and math.isnan(c1.asr_delta_lo)


def _timed(r, hit: bool = False):
    return r.model_copy(update={"outcome": r.outcome.model_copy(update={"timer_hit": hit})})


def test_the_timer_table_sets_both_arms_side_by_side_paired_on_the_same_rollouts():
    base_att = [
        _rollout("m", "t1", "c2.t1.0", success=True, score=1.0),
        _rollout("m", "t2", "c2.t2.0", success=True, score=0.5),
        _rollout("m", "t2", "c2.t2.1", success=True),  # not run in the timed arm: left out of both
    ]
    base_ben = [_rollout("m", "t1", score=1.0), _rollout("m", "t2", score=1.0)]
    timed_att = [
        _timed(_rollout("m", "t1", "c2.t1.0", success=True, score=0.5)),
        _timed(_rollout("m", "t2", "c2.t2.0", score=0.0), hit=True),
    ]
    timed_ben = [_rollout("m", "t1", score=1.0), _timed(_rollout("m", "t2", score=0.0), hit=True)]
    # The same rollout ids in both arms, with their own times.
    wall = {
        "base": {r.rollout_id: 10.0 for r in base_att + base_ben},
        "ablated": {r.rollout_id: 4.0 for r in timed_att} | {base_ben[0].rollout_id: 2.0},
    }
    settings = {"base": {"episode_timer_s": None}, "ablated": {"episode_timer_s": 5.0}}
    t = apex_ablation.orchestrator_table(
        (base_ben, base_att), (timed_ben, timed_att), settings, wall, _boot(["t1", "t2"])
    ).set_index("arm")
    assert list(t.index) == ["base", "ablated", "delta"]
    assert list(t.n_attacked) == [2, 2, 2] and list(t.n_benign) == [2, 2, 2]
    assert (t.loc["base", "n_success"], t.loc["ablated", "n_success"]) == (2, 1)
    assert (t.loc["base", "asr"], t.loc["ablated", "asr"], t.loc["delta", "asr"]) == (1.0, 0.5, -0.5)
    assert (t.loc["base", "task_score"], t.loc["ablated", "task_score"]) == (1.0, 0.5)
    assert (t.loc["base", "task_score_attacked"], t.loc["ablated", "task_score_attacked"]) == (0.75, 0.25)
    # Mean time over the episodes with a recorded time in both arms' timing files (the base arm's
    # benign t2 episode has one, its timed twin none: left out of both).
    assert (t.loc["base", "n_timed"], t.loc["ablated", "n_timed"]) == (3, 3)
    assert (t.loc["base", "wall_s_mean"], t.loc["ablated", "wall_s_mean"]) == (10.0, 10.0 / 3)
    assert t.loc["delta", "wall_s_mean"] == 10.0 / 3 - 10.0
    assert t.loc["delta", "asr_lo"] <= -0.5 <= t.loc["delta", "asr_hi"]
    assert (t.loc["base", "n_timer_hit"], t.loc["ablated", "n_timer_hit"]) == (0, 2)
    assert math.isnan(t.loc["base", "episode_timer_s"]) and t.loc["ablated", "episode_timer_s"] == 5.0


def test_the_timer_page_names_the_setting_the_denominators_and_the_notice(tmp_path):
    rs = [_rollout("m", "t1", "c2.t1.0")], [_rollout("m", "t1")]
    wall = {"base": {}, "ablated": {}}
    settings = {"base": {"episode_timer_s": None}, "ablated": {"episode_timer_s": 5.0}}
    frame = apex_ablation.orchestrator_table((rs[1], rs[0]), (rs[1], rs[0]), settings, wall, _boot(["t1"]))
    out = tmp_path / "episode-timer.csv"
    timer = {"episode_timer_s": 5.0}
    apex_ablation.write_table("episode-timer", {}, frame, out, "SIMULATOR NOTICE", {}, timer)
    page = html.unescape(out.with_suffix(".html").read_text())
    assert '{"episode_timer_s": 5.0}' in page and "n_success of n_attacked" in page
    assert "over n_benign" in page
    assert "SIMULATOR NOTICE" in page and set(pd.read_csv(out).simulator_notice) == {"SIMULATOR NOTICE"}


def test_the_written_table_has_csv_parquet_and_an_html_section(tmp_path):
    attacks = _attacks("c2.t1.0")
    frame = apex_ablation.ablation_table(
        [_rollout("m", "t1", "c2.t1.0", success=True)], [_rollout("m", "t1", "c2.t1.0")], attacks, attacks,
        _boot(["t1"]),
    )  # fmt: skip
    out = tmp_path / "no-instruction.csv"
    apex_ablation.write_table("no-instruction", {"instruction_file": False}, frame, out, None, {"a": "1"})
    assert pd.read_parquet(out.with_suffix(".parquet")).equals(pd.read_csv(out))
    page = out.with_suffix(".html").read_text()
    assert "no-instruction" in page and "instruction_file" in page


# --- the workflow --------------------------------------------------------------------------------------


def _jobs(stdout: str) -> dict[str, int]:
    table = stdout.split("Job stats:", 1)[1] if "Job stats:" in stdout else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_every_ablation_config_is_shipped():
    names = {p.name for p in EXAMPLES}
    kinds = ("placement", "no-instruction", "no-keywords", "watcher", "hidden", "timer", "permission")
    for kind in (*kinds, "upfront-arguments", "watcher-prompts"):
        assert f"apex-ablation-{kind}.yaml" in names


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_an_ablation_config_plans_its_arms_on_the_same_worlds(tmp_path, example):
    apex = yaml.safe_load(example.read_text())["apex"]
    n = len(apex["ablations"])
    copy_workflow(tmp_path, {"apex": {**apex, "enabled": True}})
    out = snakemake(tmp_path, "-n", "apex").stdout
    jobs = _jobs(out)
    cats = len(apex["categories"])
    assert jobs["apex_worlds"] == 1  # one set of frozen worlds for every arm
    if all(not a.get("attacks") for a in apex["ablations"]):
        # Orchestrator arms: the main attack set, attacked and benign episodes under the arm's settings.
        assert jobs["apex_attacks"] == 1 and jobs["apex_ablation_table"] == n
        assert jobs["apex_attacked"] == cats * (1 + n) and jobs["apex_benign"] == 1 + n
        assert jobs["apex_replay"] == (1 + cats) * (1 + n) and jobs["apex_judge"] == 1 + n
        assert "results/suite/apex/ablations/" not in out
        for a in apex["ablations"]:
            assert f"results/apex/ablations/{a['name']}/runs/sim/benign/shard0.jsonl" in out
        return
    assert jobs["apex_attacks"] == 1 + n and jobs["apex_ablation_table"] == n
    assert jobs["apex_attacked"] == cats * (1 + n) and jobs["apex_benign"] == 1
    # Replay: the main run's benign and attacked shards, and each ablated arm's attacked shards.
    assert jobs["apex_instances"] == 1 + n and jobs["apex_replay"] == 1 + cats * (1 + n)
    assert jobs["apex_judge"] == 1 + n  # each arm's open cases go through the same judge rule
    for a in apex["ablations"]:
        assert f"results/suite/apex/ablations/{a['name']}/attacks.json" in out
        assert f"results/apex/ablations/{a['name']}/runs/sim/attacked/" in out
        assert f"results/apex/report/ablations/{a['name']}.csv" in out


@pytest.mark.slow
def test_an_ablation_runs_end_to_end_into_its_table(tmp_path):
    apex = yaml.safe_load((REPO / "config/examples/apex-ablation-placement.yaml").read_text())["apex"]
    apex["ablations"] = apex["ablations"][:1]  # existing-start: its attack set reads the benign runs
    copy_workflow(tmp_path, {"suite": {"apex": {"scale": 0.05}}, "apex": {**apex, "enabled": True}})
    snakemake(tmp_path, "results/apex/report/ablations/existing-start.csv")
    table = pd.read_csv(tmp_path / "results/apex/report/ablations/existing-start.csv")
    assert set(table.category) == {"c1", "all"}
    every = table[table.category == "all"].iloc[0]
    # 15 tasks x 2 category-1 attacks in each arm
    assert every.n_attacked_base == every.n_attacked_ablated == 30
    judged = json.loads((tmp_path / "results/apex/ablations/existing-start/judge/sim.json").read_text())
    assert len(judged["decisions"]) == 30  # the ablated arm's episodes, judged like the main run's
    replayed = json.loads((tmp_path / "results/apex/report/ablations/provenance.json").read_text())
    assert replayed["existing-start.csv"]["ablated_replay"] == {"replayed": 30, "mismatched_rollouts": 0}
    prov = json.loads((tmp_path / "results/suite/apex/ablations/existing-start/provenance.json").read_text())
    entry = prov["attacks.json"]
    assert entry["ablation"] == "existing-start" and entry["options"]["placement"] == "existing_start"
    assert entry["benign_shards"] == ["results/apex/runs/sim/benign/shard0.jsonl"]
    ablated = json.loads((tmp_path / "results/suite/apex/ablations/existing-start/attacks.json").read_text())
    base = json.loads((tmp_path / "results/suite/apex/attacks.json").read_text())
    assert ablated["options"]["placement"] == "existing_start" and base["options"]["placement"] == "created"
    # Every file-vector attack injects into a file that task's benign episode read (when it read any).
    chosen = {v["chosen"] for v in entry["source_choices"].values()}
    # The benign simulator reads most tasks' files: most choices are constrained by what it read.
    assert sum(bool(v["benign_read"]) for v in entry["source_choices"].values()) >= 10
    placed = {
        p["target"].removeprefix("file:")
        for a in ablated["instances"]
        if a["placement"] == "existing_start"
        for p in a["payload"]
    }
    assert placed and placed <= chosen
    for v in entry["source_choices"].values():
        assert not v["benign_read"] or v["chosen"] in v["benign_read"]
