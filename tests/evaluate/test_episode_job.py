"""An acquisition or evaluation job of the audit derives its configuration, resolves its suite and reads
its instances once (``evaluate.job.EpisodeJob``); the runner and the layers below take those from it,
however many episodes the job runs."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from conftest import write_suite_spec

from evoaudit import config as config_mod
from evoaudit.config import Config
from evoaudit.evaluate import runner
from evoaudit.evaluate.acquire import acquire
from evoaudit.evaluate.stage import evaluate_shard
from evoaudit.methods.evolve import evolve
from evoaudit.seal.freeze import combine_manifests, freeze_lineage, open_lineage, unseal
from evoaudit.suite import registry
from evoaudit.suite.agentdojo.banking.instances import build_instances
from evoaudit.transfer_config import write_transfer_config

RAW = {
    "lineages": ["L1"],
    "evaluation": {"shards": 2},
    "suite": {"families": ["user_task_0", "user_task_3"]},
    "transfer": {"enabled": True},
}


@pytest.fixture(scope="module")
def sealed(tmp_path_factory):
    """One lineage acquired, evolved (static), frozen and unsealed: what an evaluation job opens."""
    results = tmp_path_factory.mktemp("results")
    cfg = config_mod.from_dict(RAW)
    table, spec = results / "suite" / "instances.parquet", results / "suite" / "suite_spec.json"
    table.parent.mkdir(parents=True)
    write_suite_spec(spec, build_instances(cfg), cfg.roles.endpoint_variants, table)
    acq = results / "acquire" / "L1"
    acq.mkdir(parents=True)
    acquire(cfg, "L1", table, spec, acq / "rollouts.jsonl", acq / "record.json")
    artifact = results / "artifacts" / "L1" / "static"
    evolve(cfg, "L1", "static", acq / "rollouts.jsonl", acq / "record.json", artifact)
    manifest = results / "freeze" / "L1" / "manifest.json"
    freeze_lineage("L1", [artifact], results, manifest)
    combine_manifests([manifest], results, results / "freeze" / "manifest.json")
    unseal(results / "freeze" / "manifest.json", results, results / "freeze" / "unseal.json")
    open_lineage(manifest, results / "freeze" / "unseal.json", results / "freeze" / "L1" / "unseal.json")
    transfer = results / "transfer" / "config.json"
    transfer.parent.mkdir(parents=True)
    write_transfer_config(cfg, transfer)
    paths = dict(
        table=table,
        spec=spec,
        manifest_path=manifest,
        unseal_event=results / "freeze" / "L1" / "unseal.json",
        artifact_dir=artifact,
        results_dir=results,
    )
    return cfg, results, paths, transfer


class _Counts:
    """Counts, per calling module, what a job asks: suite resolutions, instance-table reads, derived
    configurations validated, runner settings read; and keeps the settings the runner was handed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.suites: Counter[str] = Counter()
        self.tables = 0
        self.validated = 0
        self.settings_read = 0
        self.settings: list[Any] = []
        self.episodes = 0
        real_get_suite = registry.get_suite
        # Every module that bound the registry's function by name: count who resolves a suite.
        for name, module in list(sys.modules.items()):
            if name.startswith("evoaudit") and getattr(module, "get_suite", None) is real_get_suite:

                def counted(suite_name: str, _module: str = name) -> Any:
                    self.suites[_module] += 1
                    return real_get_suite(suite_name)

                monkeypatch.setattr(module, "get_suite", counted)
        from evoaudit.seal import guard

        for reader in ("read_instance_table", "read_endpoint_table"):
            real_reader = getattr(guard, reader)

            def read(*args: Any, _real: Any = real_reader, **kwargs: Any) -> Any:
                self.tables += 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(guard, reader, read)
        real_from_dict = config_mod.from_dict

        def from_dict(*args: Any, **kwargs: Any) -> Config:
            self.validated += 1
            return real_from_dict(*args, **kwargs)

        monkeypatch.setattr(config_mod, "from_dict", from_dict)
        real_of = runner.RunSettings.of.__func__  # type: ignore[attr-defined]

        def of(cls: type, cfg: Config) -> Any:
            self.settings_read += 1
            return real_of(cls, cfg)

        monkeypatch.setattr(runner.RunSettings, "of", classmethod(of))
        real_run_episode = runner.run_episode

        async def run_episode(run: Any, *args: Any, **kwargs: Any) -> Any:
            self.episodes += 1
            self.settings.append(run)
            return await real_run_episode(run, *args, **kwargs)

        monkeypatch.setattr(runner, "run_episode", run_episode)

    def resolved(self) -> int:
        return sum(self.suites.values())


def _assert_typed_settings(counts: _Counts) -> None:
    # The runner holds the typed sections it reads, not the whole configuration.
    run = counts.settings[0]
    assert all(s is run for s in counts.settings)
    assert not any(isinstance(getattr(run, f.name), Config) for f in fields(run))
    assert isinstance(run.suite_cfg, config_mod.SuiteConfig) and isinstance(run.agent, config_mod.AgentConfig)


def test_an_acquisition_job_resolves_its_suite_and_reads_its_table_and_settings_once(
    sealed, tmp_path, monkeypatch
):
    cfg, results, paths, _ = sealed
    counts = _Counts(monkeypatch)
    out = tmp_path / "acquire"
    out.mkdir()
    acquire(cfg, "L1", paths["table"], paths["spec"], out / "rollouts.jsonl", out / "record.json")
    assert counts.episodes > 1  # several episodes, so a per-episode lookup would show
    assert counts.resolved() == 1, dict(counts.suites)
    assert counts.tables == 1
    assert counts.settings_read == 1
    assert counts.validated == 0
    _assert_typed_settings(counts)


@pytest.mark.parametrize("arm", ["benign", "attacked"])
def test_an_evaluation_job_resolves_its_suite_and_reads_its_table_and_settings_once(
    sealed, tmp_path, monkeypatch, arm
):
    cfg, results, paths, _ = sealed
    counts = _Counts(monkeypatch)
    evaluate_shard(cfg, "L1", "static", arm, 0, out=tmp_path / "shard0.jsonl", **paths)
    assert counts.episodes > 1
    assert counts.resolved() == 1, dict(counts.suites)
    assert counts.tables == 1
    assert counts.settings_read == 1
    assert counts.validated == 0
    _assert_typed_settings(counts)


def test_a_transfer_job_derives_its_configuration_once_and_runs_under_it(sealed, tmp_path, monkeypatch):
    cfg, results, paths, transfer = sealed
    counts = _Counts(monkeypatch)
    evaluate_shard(cfg, "L1", "static", "attacked", 0, out=tmp_path / "t.jsonl", transfer=transfer, **paths)
    assert counts.validated == 1  # the transfer configuration: derived and validated once per job
    assert counts.resolved() == 1, dict(counts.suites)
    assert counts.tables == 1
    assert counts.settings_read == 1
    # The episodes ran under the transfer configuration's goal subset, not the audit's.
    goals = {s.goal for s in _specs(tmp_path / "t.jsonl")}
    assert goals <= set(cfg.transfer.goals)


def _specs(path: Path) -> list[Any]:
    from evoaudit.jsonl import iter_records
    from evoaudit.records import Rollout

    return list(iter_records(path, Rollout))
