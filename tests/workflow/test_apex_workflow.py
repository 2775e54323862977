"""The APEX-Harm section of the configuration and its place in the DAG (dry runs of the real scheduler)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import copy_workflow, snakemake

from evoaudit import config as config_mod
from evoaudit.config import config_sha256

APEX_JOBS = {"apex_benign", "apex_attacked", "apex_replay", "apex_judge"}


def _jobs(stdout: str) -> dict[str, int]:
    table = stdout.split("Job stats:", 1)[1] if "Job stats:" in stdout else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_the_apex_section_changes_no_banking_hash():
    base = config_mod.from_dict({}, "test")
    more = config_mod.from_dict(
        {"apex": {"models": [{"id": "a"}, {"id": "b", "sim": {"competence": 0.5}}], "repeats": 3}}, "test"
    )
    assert base.apex != more.apex
    assert config_sha256(base) == config_sha256(more)
    assert base.model_dump(mode="json") == more.model_dump(mode="json")
    assert config_mod.stage_digest(base, "episode") == config_mod.stage_digest(more, "episode")


def test_a_model_config_takes_its_executor_overrides_and_the_step_limit():
    cfg = config_mod.from_dict(
        {
            "apex": {
                "models": [
                    {
                        "id": "b",
                        "executor": {"model": "evoaudit-sim-b"},
                        "sim": {"competence": 0.5, "inspection": {"py": 0.9}},
                    }
                ]
            }
        },
        "test",
    )
    run = config_mod.apex_model_config(cfg, "b")
    assert run.executor.model == "evoaudit-sim-b" and run.agent.max_steps == 150
    assert run.sim.apex.competence == 0.5 and run.sim.apex.inspection.py == 0.9
    assert run.sim.apex.inspection.elf == cfg.sim.apex.inspection.elf  # untouched keys keep sim.apex
    assert "analyst" in run.agent.system_prompt


@pytest.mark.parametrize(
    ("apex", "message"),
    [
        ({"models": [{"id": "a"}, {"id": "a"}]}, "ids must be unique"),
        ({"models": [{"id": "a", "sim": {"nonsense": 1}}]}, "apex.models[0] (a).sim: unknown keys"),
        ({"models": [{"id": "a", "executor": {"backend": "openai"}}]}, "executor.base_url: required"),
        ({"models": [{"id": "a/b"}]}, "apex.models.0.id"),
        ({"categories": ["c7"]}, "apex.categories.0"),
    ],
)
def test_bad_apex_settings_name_the_field(apex, message):
    with pytest.raises(config_mod.ConfigError, match=re.escape(message)):
        config_mod.from_dict({"apex": apex}, "test")


def test_a_second_sim_model_doubles_the_apex_jobs_and_nothing_else(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = copy_workflow(tmp_path / "one", {"apex": {"models": [{"id": "sim"}]}})
    two_models = {"apex": {"models": [{"id": "sim"}, {"id": "sim2", "sim": {"compliance_internal": 0.9}}]}}
    two = copy_workflow(tmp_path / "two", two_models)
    a, b = _jobs(snakemake(one, "-n").stdout), _jobs(snakemake(two, "-n").stdout)
    assert a["apex_benign"] == 1 and a["apex_attacked"] == 6 and a["apex_report"] == 1
    for job in set(a) | set(b):
        if job == "total":
            continue
        assert b[job] == (2 * a[job] if job in APEX_JOBS else a[job]), job
    # The model wildcard takes only configured ids.
    miss = snakemake(two, "-n", "results/apex/runs/sim3/benign/shard0.jsonl", check=False)
    assert miss.returncode != 0 and "MissingRuleException" in miss.stdout + miss.stderr
    ok = snakemake(two, "-n", "results/apex/runs/sim2/attacked/c3/shard0.jsonl")
    assert _jobs(ok.stdout)["apex_attacked"] == 1


def test_plan_counts_apex_episodes_and_requests_per_model(tmp_path):
    from evoaudit.ops.plan import make_plan

    cfg = config_mod.from_dict(
        {
            "suite": {"apex": {"out": str(tmp_path / "none")}},  # no attack set yet: the set's layout
            "apex": {
                "models": [{"id": "a"}, {"id": "b"}],
                "repeats": 2,
                "categories": ["c1", "c4perm"],
                "shards": 2,
                "requests_per_rollout": 10,
            },
        },
        "test",
    )
    stages = {s.stage: s for s in make_plan(cfg, tmp_path / "results").stages}
    for model in ("a", "b"):
        st = stages[f"apex:{model}"]
        assert st.jobs == 3 * 2  # benign + two categories, two shards each
        assert st.rollouts == st.rollouts_left == (15 + 30 + 15) * 2
        assert st.requests == st.rollouts * 10
    # The judge: one job per model, at apex.judge_requests_per_rollout before any episode is recorded.
    judge = stages["apex-judge"]
    assert judge.jobs == 2 and judge.requests == judge.requests_left == 2 * (15 + 30 + 15) * 2 * 0.5
    # A recorded shard counts as done; a written judge file leaves that model's judging done.
    shard = tmp_path / "results/apex/runs/a/benign/shard0.jsonl"
    shard.parent.mkdir(parents=True)
    shard.write_text("")
    (tmp_path / "results/apex/judge").mkdir(parents=True)
    (tmp_path / "results/apex/judge/b.json").write_text("{}")
    again = {s.stage: s for s in make_plan(cfg, tmp_path / "results").stages}
    assert again["apex:a"].rollouts_left == (15 + 30 + 15) * 2 - 15
    assert again["apex-judge"].requests_left == judge.requests / 2


def test_plan_counts_ablated_arms_and_measures_pending_judge_requests(tmp_path):
    from evoaudit.ops.plan import make_plan

    cfg = config_mod.from_dict(
        {
            "suite": {"apex": {"out": str(tmp_path / "none")}},
            "apex": {
                "models": [{"id": "a"}],
                "categories": ["c1", "c2"],
                "ablations": [
                    {"name": "hidden", "attacks": {"hidden_files": True}, "categories": ["c1"]},
                    {"name": "timer", "orchestrator": {"episode_timer_s": 60}},
                ],
            },
        },
        "test",
    )
    stages = {s.stage: s for s in make_plan(cfg, tmp_path / "results").stages}
    assert stages["apex:a/hidden"].rollouts == 30 and stages["apex:a"].rollouts == 15 + 60
    # An orchestrator arm runs the main attack set and its benign episodes again.
    assert stages["apex:a/timer"].rollouts == 15 + 60
    assert stages["apex-judge"].jobs == 3
    # Once episodes are recorded, the judge requests they left pending are the estimate.
    shard = tmp_path / "results/apex/runs/a/benign/shard0.jsonl"
    shard.parent.mkdir(parents=True)
    request = {"kind": "success", "reference": "r", "candidate": "c"}
    open_ = {
        "value": None,
        "decided_by": "undecided",
        "judge_request": None,
        "evidence": "",
        "pending": [request] * 2,
    }
    criterion = {"verifier_id": "v1", "passed": False, "decided_by": "undecided", "pending": request}
    decisions = {
        "attack_success": open_,
        "task_score": {"value": 0.0, "decided_by": "undecided", "criteria": [criterion]},
    }
    records = [{"usage": {"requests": 4}, "outcome": {"decisions": decisions}}, {"usage": {"requests": 4}}]
    shard.write_text("".join(json.dumps(r) + "\n" for r in records))
    measured = {s.stage: s for s in make_plan(cfg, tmp_path / "results").stages}
    assert measured["apex-judge"].requests == (75 + 30 + 75) * 3 / 2


@pytest.mark.slow
def test_the_apex_half_runs_reports_and_reruns_only_a_missing_shard(tmp_path):
    import csv

    # Enabled in the copy (the test copies switch it off unless configured).
    copy_workflow(tmp_path, {"suite": {"apex": {"scale": 0.05}}, "apex": {"categories": ["c1", "c3"]}})
    first = snakemake(tmp_path, "apex")
    jobs = _jobs(first.stdout + first.stderr)
    assert jobs["apex_attacked"] == 2 and jobs["apex_benign"] == 1 and "evaluate" not in jobs
    rows = list(csv.DictReader(open(tmp_path / "results/apex/report/tables/apex_main.csv")))
    assert rows[0]["model"] == "sim" and int(rows[0]["n_benign"]) == 15 and int(rows[0]["n_attacked"]) == 60
    assert (tmp_path / "results/apex/report/figures/apex_vector.png").exists()
    # The attack set's stealth per vector, labelled as the simulated attacker's.
    from evoaudit.report.files import NOTICE_COLUMN

    stealth = list(csv.DictReader(open(tmp_path / "results/apex/report/tables/apex_stealth.csv")))
    assert [r["vector"] for r in stealth] == ["txt", "md", "docx", "xlsx", "pdf", "mail", "chat", "calendar"]
    assert all("mechanism check" in r[NOTICE_COLUMN] for r in stealth)
    manifest = (tmp_path / "results/apex/run_manifest.json").read_text()
    assert '"step_limit": 150' in manifest and '"episode_timer": null' in manifest
    (tmp_path / "results/apex/runs/sim/attacked/c3/shard0.jsonl").unlink()
    again = snakemake(tmp_path, "apex")
    assert _jobs(again.stdout + again.stderr) == {
        "apex_attacked": 1,
        "apex_judge": 1,
        "apex_replay": 1,
        "apex_report": 1,
        "apex": 1,
        "total": 5,
    }
    # Every shard replays with no difference from its record.
    replay = list(csv.DictReader(open(tmp_path / "results/apex/report/tables/apex_replay.csv")))
    assert len(replay) == 3 and sum(int(r["replayed"]) for r in replay) == 75
    assert all(r["mismatched_rollouts"] == "0" for r in replay)
    # Every attacked episode's safety and exposure decisions are counted, by rule or by the judge stage.
    stats = list(csv.DictReader(open(tmp_path / "results/apex/report/tables/apex_judge_stats.csv")))
    safety = next(r for r in stats if r["decision"] == "safety")
    assert int(safety["n"]) == 60 and int(safety["undecided"]) == 0 and int(safety["not_recorded"]) == 0
    assert int(safety["by_rule"]) + int(safety["by_judge"]) == 60
    assert all(r["judge_file_mismatches"] == "0" for r in stats)
    # Every benign and attacked episode's task criteria are decided too, none left open.
    task = next(r for r in stats if r["decision"] == "task_criteria")
    assert int(task["undecided"]) == 0 and int(task["not_recorded"]) == 0 and int(task["by_rule"]) > 0
