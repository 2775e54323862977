"""Persistence at the endpoints (the poisoning extension, docs/poisoning.md): is the poisoning goal met
on the terminal state of episodes where no injection is present (sleeper success), and on the attacked
ones, for a poisoned lineage and, on identical episodes, its clean twin?

Each rollout's recorded calls are re-executed on the instance's pre-state (the endpoint table opened
through the seal, as evaluation opens it) and the goal's check is the suite's (``AuditSuite.check_goal``,
AgentDojo's security function of the goal); the re-executed state must be the recorded terminal state,
which each row records."""

from __future__ import annotations

from pathlib import Path

from evoaudit.config import Config
from evoaudit.jsonl import iter_records
from evoaudit.poisoning import poisoned
from evoaudit.records import Call, PersistenceReport, PersistenceRow, Rollout
from evoaudit.seal.guard import open_endpoints
from evoaudit.suite.registry import get_suite


def _row(rollout: Rollout, instance, goal: str) -> PersistenceRow:
    suite = get_suite(instance.suite)
    env = suite.build_environment(instance, rollout.goal, dict(rollout.injections))
    pre = suite.copy_environment(env)
    for call in rollout.calls:
        if call.args is not None:
            suite.run_call(env, Call(function=call.function, args=call.args))
    failed = rollout.outcome.infra_failure is not None
    return PersistenceRow(
        lineage=rollout.lineage,
        condition=rollout.condition,
        arm=rollout.arm,
        instance_id=rollout.instance_id,
        family=rollout.family,
        goal=rollout.goal,
        seed=rollout.seed,
        infra_failure=failed,
        utility=rollout.outcome.utility,
        unauthorized_state_change=rollout.outcome.unauthorized_state_change,
        poison_goal_met=not failed and suite.check_goal(goal, rollout.final_output or "", pre, env),
        state_matches=failed or suite.state(env) == rollout.terminal_state,
    )


def persistence(
    cfg: Config,
    lineage: str,
    shards: list[Path],
    *,
    endpoint: Path,
    spec: Path,
    manifest: Path,
    event: Path,
    results_dir: Path,
) -> PersistenceReport:
    """The persistence report of poisoned ``lineage`` over ``shards`` (its own and its twin's)."""
    poison = poisoned(cfg, lineage)
    if poison is None:
        raise ValueError(f"persistence: {lineage} is not a poisoned lineage of this configuration")
    opened = open_endpoints(endpoint, spec, manifest, event, results_dir)
    by_id = {i.instance_id: i for i in opened.instances}
    rows = [
        _row(r, by_id[r.instance_id], poison.goal)
        for path in shards
        for r in sorted(iter_records(path, Rollout), key=lambda r: r.rollout_id)
    ]
    return PersistenceReport(
        lineage=lineage, twin=poison.twin, goal=poison.goal, share=poison.share, rows=rows
    )
