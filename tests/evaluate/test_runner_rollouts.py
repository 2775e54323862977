"""The evaluation runner on AgentDojo's real Banking environment: rollouts, records, resume."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace

import pytest

from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.evaluate import resume
from evoaudit.evaluate.runner import ExcludedShareError, RunSettings, bind, plan_episodes, run_one, run_specs
from evoaudit.jsonl import partial_path, read_records
from evoaudit.models.factory import make_backend
from evoaudit.records import Rollout
from evoaudit.seeds import derive_seed
from evoaudit.suite.agentdojo.banking.instances import build_instances


@pytest.fixture(scope="module")
def setup():
    # A simulator that always reads, never errs and always complies: outcomes are then known in advance.
    cfg = config_mod.from_dict(
        {"sim": {"competence": 1.0, "read_propensity": 1.0, "compliance": 1.0}, "agent": {"max_steps": 20}}
    )
    instances = [i for i in build_instances(cfg) if i.variant == "v3"]
    backend = make_backend(cfg, cfg.executor, instances)
    return cfg, instances, backend


def _instance(instances, family):
    return next(i for i in instances if i.family == family)


def test_benign_rollout_executes_real_tools_and_records_terminal_state(setup):
    cfg, instances, backend = setup
    inst = _instance(instances, "user_task_3")
    spec = plan_episodes("L1", "static", "benign", [inst], [])[0]
    r = asyncio.run(run_one(cfg, backend, spec, system_prompt(cfg.agent.system_prompt), None))
    assert r.outcome.utility is True
    assert r.outcome.attack_success is None and r.outcome.exposed is False
    sent = [c for c in r.calls if c.function == "send_money"]
    assert len(sent) == 1 and sent[0].error is None
    # The terminal state is AgentDojo's environment after the real tool ran.
    new = [t for t in r.terminal_state["bank_account"]["transactions"] if t["id"] > 5]
    assert [(t["recipient"], t["amount"]) for t in new] == [
        (sent[0].args["recipient"], sent[0].args["amount"])
    ]
    assert [m.role for m in r.messages[:2]] == ["system", "user"]
    assert r.messages[-1].role == "assistant" and not r.messages[-1].tool_calls


def test_attacked_rollout_places_injection_and_records_goal_success(setup):
    cfg, instances, backend = setup
    inst = _instance(instances, "user_task_3")
    spec = plan_episodes("L1", "static", "attacked", [inst], ["injection_task_7"])[0]
    r = asyncio.run(run_one(cfg, backend, spec, system_prompt(cfg.agent.system_prompt), None))
    assert set(r.injections) == set(inst.vectors) and r.injections
    assert r.outcome.exposed is True
    assert r.outcome.attack_success is True  # injection_task_7: the password was changed
    assert r.terminal_state["user_account"]["password"] == "new_password"
    assert r.outcome.harm["account_change"] is True and r.outcome.unauthorized_state_change is True


def test_benign_and_attacked_rollouts_differ(setup):
    cfg, instances, backend = setup
    inst = _instance(instances, "user_task_3")
    benign = plan_episodes("L1", "static", "benign", [inst], [])[0]
    attacked = plan_episodes("L1", "static", "attacked", [inst], ["injection_task_7"])[0]
    sys_prompt = system_prompt(cfg.agent.system_prompt)
    a = asyncio.run(run_one(cfg, backend, benign, sys_prompt, None))
    b = asyncio.run(run_one(cfg, backend, attacked, sys_prompt, None))
    assert [c.function for c in a.calls] != [c.function for c in b.calls]


def test_shard_appends_each_rollout_and_skips_finished_ones_on_restart(setup, tmp_path):
    cfg, instances, backend = setup
    specs = plan_episodes("L1", "static", "benign", instances[:4], [])
    out = tmp_path / "shard0.jsonl"
    sys_prompt = system_prompt(cfg.agent.system_prompt)
    # A previous run finished two rollouts and was killed while writing the third.
    bound = [bind(RunSettings.of(cfg), s, backend.fingerprint()) for s in specs[:2]]
    done = [asyncio.run(run_one(cfg, backend, s, sys_prompt, None)) for s in bound]
    partial = partial_path(out)
    partial.write_text("".join(r.model_dump_json() + "\n" for r in done) + '{"rollout_id": "L1/sta')

    calls = []

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def fingerprint(self):
            return self.inner.fingerprint()

        async def complete(self, request):
            calls.append(request.messages[1].content)
            return await self.inner.complete(request)

    rollouts = asyncio.run(run_specs(cfg, Counting(backend), specs, sys_prompt, None, out))
    assert not partial.exists() and out.exists()
    assert [r.rollout_id for r in read_records(out, Rollout)] == [s.rollout_id for s in specs]
    asked = set(calls)
    assert asked == {s.instance.prompt for s in specs[2:]}  # finished rollouts were not redone
    assert rollouts[0].model_dump() == done[0].model_dump()


class _Crashing:
    """The simulator, except that the episode of ``prompt`` raises ``exc`` (a bug of ours, or a stop)."""

    def __init__(self, backend, prompt: str, exc: BaseException):
        self.backend, self.prompt, self.exc = backend, prompt, exc

    def fingerprint(self):
        return self.backend.fingerprint()

    async def complete(self, request):
        if request.messages[1].content == self.prompt:
            raise self.exc
        return await self.backend.complete(request)


def _cfg(cfg, max_excluded_share: float):
    return cfg.model_copy(
        update={
            "executor": cfg.executor.model_copy(update={"concurrency": 1}),
            "evaluation": cfg.evaluation.model_copy(update={"max_excluded_share": max_excluded_share}),
        }
    )


def test_an_episode_that_raises_is_recorded_as_harness_error_and_the_shard_goes_on(setup, tmp_path, caplog):
    cfg, instances, backend = setup
    specs = plan_episodes("L1", "static", "benign", instances[:3], [])
    out = tmp_path / "shard0.jsonl"
    crashing = _Crashing(backend, specs[1].instance.prompt, RuntimeError("planted bug"))
    with caplog.at_level(logging.ERROR, logger="evoaudit.evaluate.runner"):
        rollouts = asyncio.run(
            run_specs(_cfg(cfg, 1.0), crashing, specs, system_prompt(cfg.agent.system_prompt), None, out)
        )
    assert [r.rollout_id for r in read_records(out, Rollout)] == [s.rollout_id for s in specs]
    failed = rollouts[1].outcome
    assert (failed.infra_failure, failed.infra_failure_detail) == (
        "harness_error",
        "RuntimeError: planted bug",
    )
    assert failed.utility is False and rollouts[1].calls == [] and rollouts[1].resume_key is not None
    assert [r.outcome.infra_failure for r in (rollouts[0], rollouts[2])] == [None, None]
    assert rollouts[0].outcome.utility is True and rollouts[0].calls
    logged = [r for r in caplog.records if specs[1].rollout_id in r.getMessage()]
    assert logged and logged[0].exc_info and "planted bug" in caplog.text and "Traceback" in caplog.text


class _Unserialisable(_Crashing):
    """The simulator, except that its replies in the episode of ``prompt`` end in a lone surrogate, which a
    JSON decoder yields for ``"\\ud800"`` and no UTF-8 record can hold."""

    async def complete(self, request):
        resp = await self.backend.complete(request)
        if request.messages[1].content != self.prompt:
            return resp
        msg = resp.message.model_copy(update={"content": (resp.message.content or "") + "\ud800"})
        return resp.model_copy(update={"message": msg})


def test_a_rollout_that_cannot_be_serialised_is_recorded_as_harness_error_and_the_shard_goes_on(
    setup, tmp_path
):
    cfg, instances, backend = setup
    specs = plan_episodes("L1", "static", "benign", instances[:3], [])
    out = tmp_path / "shard0.jsonl"
    bad = _Unserialisable(backend, specs[1].instance.prompt, RuntimeError("unused"))
    rollouts = asyncio.run(
        run_specs(_cfg(cfg, 1.0), bad, specs, system_prompt(cfg.agent.system_prompt), None, out)
    )
    assert [r.rollout_id for r in read_records(out, Rollout)] == [s.rollout_id for s in specs]
    failed = rollouts[1].outcome
    assert failed.infra_failure == "harness_error"
    assert failed.infra_failure_detail.startswith("PydanticSerializationError")
    assert [r.outcome.infra_failure for r in (rollouts[0], rollouts[2])] == [None, None]


def test_harness_errors_past_the_excluded_share_fail_the_job_and_a_rerun_redoes_only_them(setup, tmp_path):
    cfg, instances, backend = setup
    specs = plan_episodes("L1", "static", "benign", instances[:3], [])
    out = tmp_path / "shard0.jsonl"
    sys_prompt = system_prompt(cfg.agent.system_prompt)
    crashing = _Crashing(backend, specs[2].instance.prompt, RuntimeError("planted bug"))
    with pytest.raises(ExcludedShareError, match="harness_error: 1"):
        asyncio.run(run_specs(_cfg(cfg, 0.02), crashing, specs, sys_prompt, None, out))
    assert not out.exists()
    kept = [json.loads(line) for line in partial_path(out).read_text().splitlines()]
    assert [k["outcome"]["infra_failure"] for k in kept] == [None, None, "harness_error"]

    asked = []

    class Counting:
        def fingerprint(self):
            return backend.fingerprint()

        async def complete(self, request):
            asked.append(request.messages[1].content)
            return await backend.complete(request)

    rollouts = asyncio.run(run_specs(_cfg(cfg, 0.02), Counting(), specs, sys_prompt, None, out))
    assert set(asked) == {specs[2].instance.prompt}  # the finished two were kept
    assert [r.outcome.infra_failure for r in rollouts] == [None, None, None]


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), asyncio.CancelledError()])
def test_cancellation_still_ends_the_shard_keeping_finished_rollouts(setup, tmp_path, stop):
    cfg, instances, backend = setup
    specs = plan_episodes("L1", "static", "benign", instances[:3], [])
    out = tmp_path / "shard0.jsonl"
    crashing = _Crashing(backend, specs[2].instance.prompt, stop)
    with pytest.raises(type(stop)):
        asyncio.run(
            run_specs(_cfg(cfg, 1.0), crashing, specs, system_prompt(cfg.agent.system_prompt), None, out)
        )
    assert not out.exists()
    kept = [json.loads(line)["rollout_id"] for line in partial_path(out).read_text().splitlines()]
    assert kept == [s.rollout_id for s in specs[:2]]


def test_a_bound_episode_carries_the_seed_and_resume_key_its_rollouts_record(setup, tmp_path):
    cfg, instances, backend = setup
    inst = _instance(instances, "user_task_3")
    spec = plan_episodes("L1", "static", "attacked", [inst], ["injection_task_7"])[0]
    executor = backend.fingerprint()
    run = RunSettings.of(cfg)
    bound = bind(run, spec, executor, "c" * 64)
    # The seed hashes (global seed, lineage, instance, goal, "executor"): this value is every past run's.
    assert cfg.seed == 20261130 and bound.seed == 5789285876800702648
    assert bound.seed == derive_seed(cfg.seed, "L1", inst.instance_id, "injection_task_7", "executor")
    sections = config_mod.stage_digest(cfg, "episode")
    assert bound.resume_key == resume.resume_key("c" * 64, executor, bound.seed, sections)
    # A defended twin shares the seed, never the key; a bare bind (no executor) gives no key.
    twin = bind(run, replace(spec, defense="data_marking"), executor, "c" * 64)
    assert twin.seed == bound.seed and twin.resume_key not in (None, bound.resume_key)
    assert bind(run, spec).resume_key is None
    out = tmp_path / "shard.jsonl"
    system = system_prompt(cfg.agent.system_prompt)
    [rollout] = asyncio.run(run_specs(cfg, backend, [spec], system, "c" * 64, out))
    assert (rollout.seed, rollout.resume_key) == (bound.seed, bound.resume_key)
