"""An APEX-Harm shard job derives its model's configuration, its suite and its instances once
(``ApexShardJob``), and the layers below it use those instead of deriving them again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoaudit import config as config_mod
from evoaudit.evaluate import runner
from evoaudit.evaluate.apex import shard as apex_shard
from evoaudit.records import Instance

TASK = "ib_wacc"


def _instance(variant: str, role: str) -> Instance:
    return Instance(
        instance_id=f"{TASK}.{variant}",
        suite="apex",
        family=TASK,
        variant=variant,
        role=role,
        split="seen",
        cluster="investment_banking",
        prompt="Compute the WACC.",
        environment_template="{}",
        predicate={"kind": "apex_rubric"},
        ground_truth=[],
    )


class _CountingSuite:
    """Stands in for APEX-Harm's suite object, counting what the job asks of it."""

    unsupported_defenses: dict[str, str] = {}

    def __init__(self) -> None:
        self.built = 0
        self.views: list[Any] = []

    def build_instances(self, view: Any) -> list[Instance]:
        self.built += 1
        self.views.append(view)
        return [_instance("v0", "endpoint"), _instance("v1", "acquisition")]

    def with_attack_set(self, instance: Instance, attack_set: Path) -> Instance:
        return instance.model_copy(update={"environment_template": str(attack_set)})

    def attacks(self, configured: list[str], instance: Instance) -> list[str]:
        return list(configured)

    def sandbox_info(self, suite_cfg: Any) -> dict[str, Any]:
        return {"kind": "none"}


def test_the_shard_job_derives_the_model_config_and_builds_instances_once(tmp_path, monkeypatch):
    cfg = config_mod.from_dict({"apex": {"repeats": 2}}, "test")
    suite = _CountingSuite()
    derived: list[str] = []
    real_model_config = apex_shard.apex_model_config

    def model_config(c: Any, model_id: str) -> Any:
        derived.append(model_id)
        return real_model_config(c, model_id)

    seen: dict[str, Any] = {}

    def make_backend(run_cfg: Any, endpoint: Any, instances: list[Instance]) -> Any:
        seen["backend_instances"] = instances
        seen["endpoint"] = endpoint

        class _Backend:
            def fingerprint(self) -> dict:
                return {"model": "stub"}

        return _Backend()

    async def run_specs(run_cfg: Any, backend: Any, specs: list, system: str, pin: str, out: Path) -> list:
        seen["specs"] = specs
        seen["run_cfg"] = run_cfg
        return []

    monkeypatch.setattr(apex_shard, "get_suite", lambda name: suite)
    monkeypatch.setattr(runner, "get_suite", lambda name: suite)  # the planner asks which attacks reach
    monkeypatch.setattr(apex_shard, "apex_model_config", model_config)
    monkeypatch.setattr(apex_shard, "make_backend", make_backend)
    monkeypatch.setattr(apex_shard, "run_specs", run_specs)
    monkeypatch.setattr(apex_shard, "write_provenance", lambda *a, **k: None)
    monkeypatch.setattr(apex_shard, "run_pin", lambda spec, attacks: "pin")

    attacks = tmp_path / "attacks.json"
    apex_shard.evaluate_apex_shard(
        cfg, "sim", "attacked", "c1", 0, spec_path=tmp_path / "spec.json", attacks_path=attacks, out=tmp_path
    )

    assert derived == ["sim"]  # the model's configuration: derived once per job
    assert suite.built == 1  # the instances: built once, planned and handed to the backend from the job
    assert suite.views[0].suite == seen["run_cfg"].suite  # built from the run's own suite section
    assert [i.instance_id for i in seen["backend_instances"]] == [f"{TASK}.v0"]
    assert all(i.environment_template == str(attacks) for i in seen["backend_instances"])
    assert seen["endpoint"] == cfg.apex.model("sim").executor
    # Both repeats of the one endpoint instance under the category, each from the job's instances.
    assert sorted(s.rollout_id for s in seen["specs"]) == [
        f"r0/sim/attacked/{TASK}.v0/c1",
        f"r1/sim/attacked/{TASK}.v0/c1",
    ]
