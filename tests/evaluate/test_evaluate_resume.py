"""Resume cannot mix: a partial shard keeps only rollouts made under the same artifact, endpoint and
configuration; transient infrastructure failures are redone; too many of them fail the job."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.evaluate.runner import ExcludedShareError, plan_episodes, run_specs
from evoaudit.jsonl import aside_path, partial_path, read_records, read_timing, timing_path
from evoaudit.models.base import InfraFailure
from evoaudit.models.factory import make_backend
from evoaudit.records import Rollout
from evoaudit.suite.agentdojo.banking.instances import build_instances


def _setup(overrides: dict | None = None):
    raw = {"sim": {"competence": 1.0, "read_propensity": 1.0, "compliance": 1.0}, "agent": {"max_steps": 20}}
    cfg = config_mod.from_dict(raw | (overrides or {}))
    instances = [i for i in build_instances(cfg) if i.variant == "v3"][:4]
    return cfg, instances, make_backend(cfg, cfg.executor, instances)


class Recording:
    """Wraps a backend: records which task prompts it was asked, and fails those in ``failing``."""

    def __init__(self, inner, failing: set[str] = frozenset()):
        self.inner, self.failing, self.asked = inner, set(failing), []

    def fingerprint(self):
        return self.inner.fingerprint()

    async def complete(self, request):
        prompt = request.messages[1].content
        self.asked.append(prompt)
        if prompt in self.failing:
            raise InfraFailure("retries_exhausted", "connection refused by http://127.0.0.1:9/v1")
        return await self.inner.complete(request)


def _killed_after(cfg, backend, specs, out, n, artifact):
    """A first run whose job was killed after ``n`` rollouts: the partial file holds them."""
    asyncio.run(run_specs(cfg, backend, specs[:n], system_prompt(cfg.agent.system_prompt), artifact, out))
    out.rename(partial_path(out))


def _rerun(cfg, backend, specs, out, artifact):
    return asyncio.run(run_specs(cfg, backend, specs, system_prompt(cfg.agent.system_prompt), artifact, out))


def test_a_config_change_between_kill_and_rerun_moves_old_rollouts_aside(tmp_path, caplog):
    cfg, instances, backend = _setup()
    specs = plan_episodes("L1", "static", "benign", instances, [])
    out = tmp_path / "shard0.jsonl"
    _killed_after(cfg, backend, specs, out, 2, "a" * 64)
    cfg2, _, backend2 = _setup({"agent": {"max_steps": 19}})
    rec = Recording(backend2)
    with caplog.at_level(logging.WARNING):
        _rerun(cfg2, rec, specs, out, "a" * 64)
    assert sorted(set(rec.asked)) == sorted({s.instance.prompt for s in specs})  # all redone
    stale = read_records(aside_path(out, "stale"), Rollout)
    assert len(stale) == 2
    new_keys = {r.resume_key for r in read_records(out, Rollout)}
    assert not new_keys & {r.resume_key for r in stale}
    assert "moved 2 rollouts aside" in caplog.text and "configuration" in caplog.text


def test_a_re_evolved_artifact_between_kill_and_rerun_moves_old_rollouts_aside(tmp_path, caplog):
    cfg, instances, backend = _setup()
    specs = plan_episodes("L1", "static", "benign", instances, [])
    out = tmp_path / "shard0.jsonl"
    _killed_after(cfg, backend, specs, out, 3, "a" * 64)
    with caplog.at_level(logging.WARNING):
        rollouts = _rerun(cfg, Recording(backend), specs, out, "b" * 64)
    assert {r.artifact_sha256 for r in rollouts} == {"b" * 64}
    assert {r.artifact_sha256 for r in read_records(out, Rollout)} == {"b" * 64}
    assert len(read_records(aside_path(out, "stale"), Rollout)) == 3
    assert "the artifact changed" in caplog.text


def test_an_unchanged_rerun_keeps_every_finished_rollout(tmp_path):
    cfg, instances, backend = _setup()
    specs = plan_episodes("L1", "static", "benign", instances, [])
    out = tmp_path / "shard0.jsonl"
    _killed_after(cfg, backend, specs, out, 3, None)
    rec = Recording(backend)
    _rerun(cfg, rec, specs, out, None)
    assert set(rec.asked) == {specs[3].instance.prompt}
    assert not aside_path(out, "stale").exists()


def test_a_shard_past_the_excluded_share_fails_and_the_rerun_redoes_only_the_failed(tmp_path):
    cfg, instances, backend = _setup()
    specs = plan_episodes("L1", "static", "benign", instances, [])
    out = tmp_path / "shard0.jsonl"
    outage = Recording(backend, failing={specs[1].instance.prompt})
    with pytest.raises(ExcludedShareError) as err:
        _rerun(cfg, outage, specs, out, None)
    text = str(err.value)
    assert str(out) in text and "retries_exhausted: 1" in text and "max_excluded_share" in text
    assert not out.exists()
    kept = [json.loads(line)["rollout_id"] for line in partial_path(out).read_text().splitlines()]
    assert sorted(kept) == sorted(s.rollout_id for s in specs)  # finished and failed ones stay

    recovered = Recording(backend)
    rollouts = _rerun(cfg, recovered, specs, out, None)
    assert set(recovered.asked) == {specs[1].instance.prompt}  # only the failed rollout was redone
    assert [r.rollout_id for r in rollouts] == [s.rollout_id for s in specs]
    assert all(r.outcome.infra_failure is None for r in rollouts)
    assert len(read_records(aside_path(out, "infra"), Rollout)) == 1


def test_a_shard_within_the_excluded_share_is_published_with_its_failures(tmp_path):
    cfg, instances, backend = _setup({"evaluation": {"max_excluded_share": 0.5}})
    specs = plan_episodes("L1", "static", "benign", instances, [])
    out = tmp_path / "shard0.jsonl"
    rollouts = _rerun(cfg, Recording(backend, failing={specs[0].instance.prompt}), specs, out, None)
    assert [r.outcome.infra_failure for r in rollouts].count("retries_exhausted") == 1
    assert out.exists() and not partial_path(out).exists()


def test_retry_infra_moves_failed_rollouts_of_a_published_shard_aside_and_the_rerun_redoes_them(tmp_path):
    from evoaudit.cli import main

    cfg, instances, backend = _setup({"evaluation": {"max_excluded_share": 0.5}})
    specs = plan_episodes("L1", "static", "benign", instances, [])
    out = tmp_path / "evaluate" / "L1" / "static" / "benign" / "shard0.jsonl"
    _rerun(cfg, Recording(backend, failing={specs[2].instance.prompt}), specs, out, None)
    assert out.exists()
    assert main(["retry-infra", str(tmp_path / "evaluate")]) == 0
    assert not out.exists() and len(partial_path(out).read_text().splitlines()) == 3
    assert len(read_records(aside_path(out, "infra"), Rollout)) == 1
    rec = Recording(backend)
    rollouts = _rerun(cfg, rec, specs, out, None)
    assert set(rec.asked) == {specs[2].instance.prompt}
    assert [r.rollout_id for r in rollouts] == [s.rollout_id for s in specs]
    assert all(r.outcome.infra_failure is None for r in read_records(out, Rollout))
    assert main(["retry-infra", str(tmp_path / "evaluate")]) == 0  # nothing left to move
    assert out.exists()


def test_a_published_shard_holds_no_wall_time_and_its_timing_file_does(tmp_path):
    cfg, instances, backend = _setup()
    specs = plan_episodes("L1", "static", "benign", instances, [])
    first, second = tmp_path / "a" / "shard0.jsonl", tmp_path / "b" / "shard0.jsonl"
    rollouts = _rerun(cfg, backend, specs, first, None)
    _rerun(cfg, backend, specs, second, None)
    assert first.read_bytes() == second.read_bytes()  # content only: two runs publish the same bytes
    assert all(json.loads(line).get("wall_s") is None for line in first.read_text().splitlines())
    timing = read_timing(first)
    assert list(timing) == [s.rollout_id for s in specs]
    assert [timing[r.rollout_id]["wall_s"] for r in rollouts] == [r.wall_s for r in rollouts]
    assert all(t["wall_s"] > 0 for t in timing.values())
    assert timing_path(first).name == "shard0.timing.tsv"


def test_retry_infra_keeps_the_wall_times_of_the_rollouts_it_keeps(tmp_path):
    from evoaudit.cli import main

    cfg, instances, backend = _setup({"evaluation": {"max_excluded_share": 0.5}})
    specs = plan_episodes("L1", "static", "benign", instances, [])
    out = tmp_path / "evaluate" / "L1" / "static" / "benign" / "shard0.jsonl"
    _rerun(cfg, Recording(backend, failing={specs[2].instance.prompt}), specs, out, None)
    before = read_timing(out)
    assert main(["retry-infra", str(tmp_path / "evaluate")]) == 0
    _rerun(cfg, Recording(backend), specs, out, None)
    after = read_timing(out)
    kept = [s.rollout_id for i, s in enumerate(specs) if i != 2]
    assert [after[rid] for rid in kept] == [before[rid] for rid in kept]


def test_apex_settings_do_not_change_the_banking_resume_key():
    from evoaudit.config import stage_digest

    base = config_mod.from_dict({})
    resized = config_mod.from_dict({"suite": {"apex": {"scale": 0.5}}})
    reseeded = config_mod.from_dict({"seed": base.seed + 1})
    assert stage_digest(resized, "episode") == stage_digest(base, "episode")
    assert stage_digest(reseeded, "episode") != stage_digest(base, "episode")
