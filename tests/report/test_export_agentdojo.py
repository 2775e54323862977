"""`evoaudit export agentdojo`: the static condition's Banking rollouts in AgentDojo's results layout, read
back with AgentDojo's own loaders (``load_suite_results`` over a full run, ``load_task_results`` per file)."""

from __future__ import annotations

from agentdojo.benchmark import load_suite_results, load_task_results
from agentdojo.task_suite.load_suites import get_suite
from agentdojo.types import get_text_content_as_str
from test_export_inspect import _episode, publish

from evoaudit.cli import main

USER_TASKS = list(get_suite("v1.2.2", "banking").user_tasks)
GOALS = list(get_suite("v1.2.2", "banking").injection_tasks)


def _results(root):
    """A static run over every user task: benign on v3 and v4, attacked on v3 under every goal; one
    skillopt episode that the export must leave out."""
    shards = {"benign": [], "attacked": []}
    for i, fam in enumerate(USER_TASKS):
        for v in ("v3", "v4"):
            r = _episode("benign", None, success=False, exposed=False, family=fam)
            ok = i % 2 == 0
            shards["benign"].append(
                r.model_copy(
                    update={
                        "rollout_id": f"L1/static/benign/{fam}.{v}/none",
                        "variant": v,
                        "instance_id": f"{fam}.{v}",
                        "outcome": r.outcome.model_copy(update={"utility": ok, "task_score": float(ok)}),
                    }
                )
            )
        for j, goal in enumerate(GOALS):
            shards["attacked"].append(
                _episode("attacked", goal, success=(i + j) % 3 == 0, exposed=True, family=fam)
            )
    for arm, rs in shards.items():
        d = root / "evaluate" / "L1" / "static" / arm
        d.mkdir(parents=True)
        publish(d / "shard0.jsonl", rs)
    other = root / "evaluate" / "L1" / "skillopt" / "benign"
    other.mkdir(parents=True)
    (other / "shard0.jsonl").write_text(
        _episode("benign", None, success=False, exposed=False)
        .model_copy(update={"condition": "skillopt", "rollout_id": "L1/skillopt/benign/user_task_0.v3/none"})
        .model_dump_json()
        + "\n"
    )
    return shards


def test_agentdojo_loader_reads_the_export(tmp_path):
    shards = _results(tmp_path / "results")
    cfgfile = tmp_path / "c.yaml"
    cfgfile.write_text("{}\n")
    runs = tmp_path / "runs"
    assert (
        main(
            [
                "export",
                "agentdojo",
                "--config",
                str(cfgfile),
                "--results",
                str(tmp_path / "results"),
                "--out",
                str(runs),
            ]
        )
        == 0
    )
    assert sorted(p.name for p in runs.iterdir()) == ["test-L1-static-v3", "test-L1-static-v4"]
    benign, attacked = load_suite_results(
        "banking", "test-L1-static-v3", "important_instructions", runs, "v1.2.2"
    )
    assert len(benign) == len(USER_TASKS) and len(attacked) == len(USER_TASKS) * len(GOALS)
    by_id = {r.rollout_id: r for rs in shards.values() for r in rs}
    for (task, _), res in benign.items():
        r = by_id[f"L1/static/benign/{task}.v3/none"]
        assert res.utility == r.outcome.utility and res.security is True
        assert res.attack_type is None and res.injection_task_id is None and res.injections == {}
    for (task, goal), res in attacked.items():
        r = by_id[f"L1/static/attacked/{task}.v3/{goal}"]
        assert (res.utility, res.security) == (r.outcome.utility, r.outcome.attack_success)
        assert res.attack_type == "important_instructions" and res.injections == r.injections
        assert res.duration == r.wall_s and res.error is None
        assert len(res.messages) == len(r.messages)
        for got, want in zip(res.messages, r.messages, strict=True):
            assert got["role"] == want.role
            assert (get_text_content_as_str(got["content"]) if got["content"] else None) == (
                want.content if want.content else None
            )
        tool = [m for m in res.messages if m["role"] == "tool"]
        assert [m["tool_call"].function for m in tool] == ["read_file", "send_money", "send_money"]
        assert tool[1]["tool_call"].args == {"recipient": "UK12", "amount": 98.7}
        assert [m["error"] for m in tool] == [None, None, "bad arguments"]
        calls = res.messages[4]["tool_calls"]
        assert [(c.id, c.function) for c in calls] == [("c2", "send_money"), ("c3", "send_money")]
    # v4 ran benign only: AgentDojo's per-file loader reads it.
    res = load_task_results("test-L1-static-v4", "banking", "user_task_1", "none", "none", runs)
    assert res.utility is False and res.pipeline_name == "test-L1-static-v4"
    assert not any("skillopt" in p.as_posix() for p in runs.rglob("*.json"))


def test_the_export_refuses_a_suite_that_is_not_one_of_agentdojos(tmp_path):
    import pytest

    from evoaudit import config as config_mod
    from evoaudit.errors import AuditError
    from evoaudit.report.export.agentdojo_runs import export_agentdojo

    apex = {"name": "apex", "goals": ["c1"]}
    cfg = config_mod.from_dict(
        {"suite": apex, "transfer": {"enabled": False}, "methods_params": {"placebo": {"goals": ["c1"]}}}
    )
    with pytest.raises(AuditError, match="suite.name 'apex' is not one of them .*export inspect"):
        export_agentdojo(cfg, tmp_path, tmp_path / "out")
