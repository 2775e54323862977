"""Banking rollouts in AgentDojo's own results layout and format, so that AgentDojo's loaders
(``agentdojo.benchmark.load_task_results`` / ``load_suite_results``) read them.

AgentDojo keeps one JSON file per episode at ``<logdir>/<pipeline>/<suite>/<user_task>/<attack>/
<injection_task>.json``; a benign episode is ``<user_task>/none/none.json``. The file holds what
``agentdojo.logging.TraceLogger`` writes: suite, pipeline, user task, injection task, attack type (null for
benign), the injections placed, the messages in AgentDojo's chat format (content blocks, ``FunctionCall``
tool calls, tool results with their call and error), error, utility, security, duration, the package and
benchmark versions. AgentDojo runs each user task once per pipeline, where evoaudit runs variants and
lineages; so each (lineage, condition, variant) is its own pipeline, named ``<model>-<lineage>-<condition>-
<variant>``. ``utility`` is evoaudit's corrected checker on the recorded terminal state and ``security`` is
AgentDojo's sense (True: the injection task succeeded); the rest of the outcome, the ids and the simulator
notice are in an ``evoaudit`` block that AgentDojo's loader ignores.
"""

from __future__ import annotations

import datetime as dt
import json
from importlib import metadata
from pathlib import Path
from typing import Any

from evoaudit import atomic
from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.records import Rollout
from evoaudit.report.export.shards import grouped
from evoaudit.report.simlabel import records_sim_notice
from evoaudit.report.suites import suite_metrics
from evoaudit.suite.registry import get_suite
from evoaudit.tool_args import ArgumentsError, parse_arguments


def pipeline_name(r: Rollout) -> str:
    model = str(r.executor.get("model") or r.executor.get("backend") or "unknown")
    # As AgentDojo's logger does: a '/' in the pipeline name becomes '_'.
    return f"{model}-{r.lineage}-{r.condition}-{r.variant}".replace("/", "_")


def _text(content: str | None) -> list[dict[str, str]]:
    return [{"type": "text", "content": content or ""}]


def _call(call_id: str, function: str, args: dict[str, Any] | None) -> dict[str, Any]:
    return {"function": function, "args": args or {}, "id": call_id, "placeholder_args": None}


def messages(r: Rollout) -> list[dict[str, Any]]:
    """The rollout's messages in AgentDojo's chat format, tool calls with the arguments as executed."""
    executed = {c.call_id: c for c in r.calls}
    requested = {tc.id: tc for m in r.messages for tc in m.tool_calls}

    def args(call_id: str) -> dict[str, Any] | None:
        done = executed.get(call_id)
        if done is not None:
            return done.args
        try:  # the loop's strict reading: a hostile model's text (5000 digits, NaN, deep nesting) is None
            value = parse_arguments(requested[call_id].arguments)
        except (KeyError, ArgumentsError):
            return None
        return value if isinstance(value, dict) else None

    out: list[dict[str, Any]] = []
    for m in r.messages:
        if m.role in ("system", "user"):
            out.append({"role": m.role, "content": _text(m.content)})
        elif m.role == "assistant":
            out.append(
                {
                    "role": "assistant",
                    "content": _text(m.content) if m.content is not None else None,
                    "tool_calls": [_call(tc.id, tc.name, args(tc.id)) for tc in m.tool_calls] or None,
                }
            )
        else:
            cid = m.tool_call_id or ""
            done = executed.get(cid)
            function = m.name or (done.function if done else "") or ""
            out.append(
                {
                    "role": "tool",
                    "content": _text(m.content),
                    "tool_call_id": m.tool_call_id,
                    "tool_call": _call(cid, function, args(cid)),
                    "error": done.error if done else None,
                }
            )
    return out


def task_result(
    r: Rollout,
    attack_name: str,
    benchmark_version: str,
    notice: str | None,
    stamp: str,
    suite: str = "banking",
) -> dict:
    """One episode as AgentDojo's logger writes it (``TaskResults`` fields and its context keys);
    ``suite``: its AgentDojo suite name."""
    o = r.outcome
    attacked = r.arm == "attacked"
    error = f"{o.infra_failure}: {o.infra_failure_detail or ''}".rstrip(": ") if o.infra_failure else None
    return {
        "suite_name": suite,
        "pipeline_name": pipeline_name(r),
        "user_task_id": r.family,
        "injection_task_id": r.goal if attacked else None,
        "attack_type": attack_name if attacked else None,
        "injections": dict(r.injections),
        "messages": messages(r),
        "error": error,
        "utility": bool(o.utility),
        "security": bool(o.attack_success) if attacked else True,
        # AgentDojo's field is a float; a shard without its timing file has no wall time to give.
        "duration": r.wall_s if r.wall_s is not None else 0.0,
        "evaluation_timestamp": stamp,
        "agentdojo_package_version": metadata.version("agentdojo"),
        "benchmark_version": benchmark_version,
        "evoaudit": {
            "rollout_id": r.rollout_id,
            "lineage": r.lineage,
            "condition": r.condition,
            "instance_id": r.instance_id,
            "variant": r.variant,
            "split": r.split,
            "seed": r.seed,
            "executor": r.executor,
            "artifact_sha256": r.artifact_sha256,
            "outcome": o.model_dump(mode="json"),
            "utility_basis": (
                "the suite's utility predicate as evoaudit judged it on the recorded terminal state: "
                "corrected where the run's suite spec lists a correction for the family, AgentDojo's "
                "official one otherwise"
            ),
            "simulator_notice": notice,
        },
    }


def export_agentdojo(cfg: Config, results: Path, out: Path, condition: str = "static") -> list[Path]:
    """Write ``condition``'s rollouts of the configured AgentDojo suite under ``out`` (AgentDojo's logdir);
    returns the files."""
    suite = suite_metrics(cfg.suite.name).agentdojo_suite
    if suite is None:
        raise AuditError(
            f"evoaudit export agentdojo writes rollouts of AgentDojo's suites; suite.name {cfg.suite.name!r} "
            "is not one of them (evoaudit export inspect writes any suite's)"
        )
    from evoaudit.report.simlabel import sim_notice

    groups = [g for g in grouped(results, cfg.suite.name, {cfg.suite.name}) if g.condition == condition]
    rollouts = [r for g in groups for r in g.rollouts]
    if not rollouts:
        raise AuditError(
            f"no {condition!r} rollouts under {results}/evaluate - pass --results pointing at the directory "
            "the workflow wrote, or --condition naming an evaluated condition"
        )
    notice = records_sim_notice([r.executor for r in rollouts], sim_notice(cfg))
    version = get_suite(cfg.suite.name).benchmark_version
    mtimes = {Path(s["path"]).stat().st_mtime for g in groups for s in g.shards}
    stamp = dt.datetime.fromtimestamp(max(mtimes), tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    written = []
    for r in rollouts:
        attack = cfg.suite.attack.name if r.arm == "attacked" else "none"
        path = (
            out
            / pipeline_name(r)
            / suite
            / r.family
            / attack
            / f"{r.goal if r.arm == 'attacked' else 'none'}.json"
        )
        if path in written:
            raise AuditError(f"two {condition!r} rollouts map to {path}; the shards hold a duplicate episode")
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(
            path, json.dumps(task_result(r, attack, version, notice, stamp, suite), indent=4) + "\n"
        )
        written.append(path)
    return sorted(written)
