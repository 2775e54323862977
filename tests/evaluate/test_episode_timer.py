"""The orchestrator's timer (apex.episode_timer_s, agent.time_limit_s): off by default and then invisible in
every dump and record; when set, it stops an episode before the first request past the limit, the record
says so, and the run manifest and the APEX report's timer table give it."""

from __future__ import annotations

import asyncio
import json
import math
import types

import pytest
from apex_rollout_kit import apex_rollout

from evoaudit import config as config_mod
from evoaudit.agent import loop
from evoaudit.config import ConfigError, config_sha256, stage_digest
from evoaudit.evaluate.apex import shard as apex_shard
from evoaudit.models.base import ChatResponse
from evoaudit.records import Message, Outcome, ToolCall
from evoaudit.report.apex import report as apex_report
from evoaudit.report.apex import scores as sc


class _Clock:
    """A clock the backend moves on: each request takes ``per_request`` seconds."""

    def __init__(self, per_request: float) -> None:
        self.now = 0.0
        self.per_request = per_request

    def perf_counter(self) -> float:
        return self.now


class _Busy:
    """A model that calls a tool on every turn and never answers."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.requests = 0

    def fingerprint(self) -> dict:
        return {"backend": "scripted", "model": "busy"}

    async def complete(self, request) -> ChatResponse:
        self.clock.now += self.clock.per_request
        self.requests += 1
        call = ToolCall(id=f"c{self.requests}", name="look", arguments="{}")
        return ChatResponse(message=Message(role="assistant", tool_calls=[call]))


class _Session:
    def schemas(self):
        return ({"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}},)

    def call(self, name, args):
        return "nothing here", None

    def close(self):
        pass


def _run(monkeypatch, time_limit_s, max_steps=10):
    clock = _Clock(per_request=4.0)
    monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    backend = _Busy(clock)
    opening = [Message(role="system", content="s"), Message(role="user", content="u")]
    ep = asyncio.run(
        loop.run_episode(
            backend, opening, _Session(), max_steps=max_steps, seed=None, time_limit_s=time_limit_s
        )
    )
    return ep, backend


def test_the_timer_stops_the_episode_before_the_first_request_past_the_limit(monkeypatch):
    ep, backend = _run(monkeypatch, time_limit_s=10.0)
    # Requests end at 4, 8, 12 s: the third started at 8 s (< 10) and ran to its end; none started after.
    assert (ep.timer_hit, ep.step_limit_hit, ep.steps, backend.requests) == (True, False, 3, 3)
    assert ep.wall_s == 12.0 and len(ep.calls) == 3


def test_without_a_timer_only_the_step_limit_ends_it(monkeypatch):
    ep, backend = _run(monkeypatch, time_limit_s=None, max_steps=5)
    assert (ep.timer_hit, ep.step_limit_hit, ep.steps) == (False, True, 5)


def test_the_timer_is_off_by_default_and_absent_from_every_dump_and_record():
    cfg = config_mod.from_dict({}, "test")
    assert cfg.apex.episode_timer_s is None and cfg.agent.time_limit_s is None
    assert "time_limit_s" not in cfg.agent.model_dump(mode="json")
    assert "episode_timer_s" not in cfg.apex.model_dump(mode="json")
    run = config_mod.apex_model_config(cfg, cfg.apex.models[0].id)
    assert run.agent.time_limit_s is None and "time_limit_s" not in run.agent.model_dump(mode="json")
    # An episode the timer did not stop serialises as records did before the field existed.
    outcome = Outcome(utility=True, task_score=1.0, attack_success=None, exposed=None)
    assert "timer_hit" not in outcome.model_dump(mode="json")
    stopped = outcome.model_copy(update={"timer_hit": True})
    assert json.loads(stopped.model_dump_json())["timer_hit"] is True
    assert Outcome.model_validate_json(stopped.model_dump_json()).timer_hit is True


def test_a_set_timer_reaches_the_apex_agent_and_its_resume_key():
    base = config_mod.from_dict({}, "test")
    timed = config_mod.from_dict({"apex": {"episode_timer_s": 600}}, "test")
    model = base.apex.models[0].id
    run_base, run_timed = (config_mod.apex_model_config(c, model) for c in (base, timed))
    assert run_timed.agent.time_limit_s == 600 and run_base.agent.time_limit_s is None
    # Episodes recorded without the timer are not kept for a run with it (and the other way round).
    assert stage_digest(run_timed, "episode") != stage_digest(run_base, "episode")
    # The Banking audit does not read apex.*: its configuration hash and resume keys stay.
    assert stage_digest(timed, "episode") == stage_digest(base, "episode")
    assert config_sha256(timed) == config_sha256(base)


@pytest.mark.parametrize(
    ("section", "value", "message"),
    [
        ("apex", 0, r"apex\.episode_timer_s: 0 is less than or equal to the minimum of 0"),
        ("apex", -5, r"apex\.episode_timer_s: -5 is less than or equal to the minimum of 0"),
        ("apex", "10m", r"apex\.episode_timer_s: '10m' is not of type 'number', 'null'"),
        ("agent", 0, r"agent\.time_limit_s: 0 is less than or equal to the minimum of 0"),
    ],
)
def test_a_bad_timer_is_refused_naming_the_field(section, value, message):
    key = "episode_timer_s" if section == "apex" else "time_limit_s"
    with pytest.raises(ConfigError, match=message):
        config_mod.from_dict({section: {key: value}}, "test")


def test_the_run_manifest_records_the_timer(tmp_path, monkeypatch):
    spec, attacks = tmp_path / "spec.json", tmp_path / "attacks.json"
    spec.write_text(json.dumps({"sha256": "0" * 64}))
    attacks.write_text("{}")
    monkeypatch.setattr(apex_shard, "sandbox_info", lambda cfg: {})
    off = apex_shard.run_manifest(config_mod.from_dict({}, "test"), spec, attacks)
    on = apex_shard.run_manifest(
        config_mod.from_dict({"apex": {"episode_timer_s": 90}}, "test"), spec, attacks
    )
    assert (off["episode_timer"], on["episode_timer"]) == (None, 90)


def test_the_timer_table_has_table_24s_columns():
    attacks = {
        "c1.t1.0": sc.AttackInfo("c1.t1.0", 1, "", "txt", "internal_mail", ()),
        "c1.t2.0": sc.AttackInfo("c1.t2.0", 1, "", "mail", "external_mail", ()),
    }
    attacked = [
        apex_rollout(task="t1", attack="c1.t1.0", success=True, score=0.5),
        apex_rollout(task="t2", attack="c1.t2.0", score=1.0),
        apex_rollout(task="t2", attack="c1.t1.0", success=True, score=0.0),
    ]
    attacked[2] = attacked[2].model_copy(
        update={"outcome": attacked[2].outcome.model_copy(update={"timer_hit": True})}
    )
    wall = {attacked[0].rollout_id: 30.0, attacked[1].rollout_id: 50.0}
    cfg = config_mod.from_dict(
        {"apex": {"episode_timer_s": 45}, "report": {"bootstrap": {"replicates": 200, "seed": 1}}}, "test"
    )
    row = apex_report.build_tables(cfg, [], attacked, attacks, wall)["apex_timer"].iloc[0]
    assert (row.episode_timer_s, row.n_attacked, row.n_success, row.n_timer_hit) == (45, 3, 2, 1)
    assert row.asr == pytest.approx(2 / 3) and row.task_score_attacked == pytest.approx(0.5)
    assert (row.n_timed, row.wall_s_mean) == (2, 40.0)
    assert row.asr_lo <= row.asr <= row.asr_hi
    off = apex_report.build_tables(config_mod.from_dict({}, "test"), [], attacked, attacks)["apex_timer"]
    assert off.iloc[0].episode_timer_s is None and math.isnan(off.iloc[0].wall_s_mean)


class _Runner:
    """The least a runner profile needs: three attempts (as AgentDojo), the session's tools, plain wire
    messages."""

    system_message = "s"
    attempts = 3

    def tool_schemas(self):
        return _Session().schemas()

    def request_body(self, model, messages, tools, temperature):
        return {}

    def run_call(self, name, arguments, call):
        from evoaudit.suite.interface import RunnerCall

        text, error = call(name, {})
        return RunnerCall(args={}, text=text, error=error)

    def wire_message(self, message, *, call_args=(), error=False):
        return {"role": message.role}


def test_the_timer_stops_a_runner_profile_episode_without_a_rerun(monkeypatch):
    clock = _Clock(per_request=4.0)
    monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    backend = _Busy(clock)
    opening = [Message(role="system", content="s"), Message(role="user", content="u")]
    ep = asyncio.run(
        loop.run_runner_episode(
            backend, opening, _Session(), _Runner(), max_steps=10, seed=None, time_limit_s=10.0
        )
    )
    # Stopped in its first run (no empty-answer rerun after the timer), with no final answer.
    assert (ep.timer_hit, ep.steps, backend.requests, ep.final_output) == (True, 3, 3, "")
    assert sum(m.role == "user" for m in ep.messages) == 1
