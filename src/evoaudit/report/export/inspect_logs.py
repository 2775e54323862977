"""Rollouts as Inspect AI eval logs, one per (suite, lineage, condition, arm), with inspect_ai's own types
(``EvalLog``, ``EvalSample``, ``ChatMessage*``, ``ToolCall``, ``Score``) and its own writer.

A sample is one rollout: its messages as the model saw them, each assistant tool call with the arguments
as executed, each tool result with the call's error; scores for utility, task score and, on the attacked
arm, attack success, utility under attack, exposure, unauthorised state change, disclosure and every harm
category (1.0 / 0.0; a score the suite leaves undefined is left out); the endpoint fingerprint, token usage
and wall time; evoaudit's ids and provenance in metadata. The log's results are the report's own metric
functions over the group. Needs the ``inspect`` extra (``pip install 'evoaudit[inspect]'``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.records import SCHEMA_VERSION, CheckDecision, Rollout
from evoaudit.report.export.shards import Group, grouped
from evoaudit.report.simlabel import fingerprint_is_sim, records_sim_notice
from evoaudit.report.suites import suite_metrics
from evoaudit.tool_args import ArgumentsError, parse_arguments

try:
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalError,
        EvalLog,
        EvalMetric,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalSample,
        EvalScore,
        EvalSpec,
        EvalStats,
        write_eval_log,
    )
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        ContentReasoning,
        ContentText,
        GenerateConfig,
        ModelOutput,
        ModelUsage,
    )
    from inspect_ai.scorer import Score
    from inspect_ai.tool import ToolCall, ToolCallError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise AuditError("evoaudit export inspect needs inspect_ai: pip install 'evoaudit[inspect]'") from exc

PACKAGES = ("evoaudit", "agentdojo", "inspect_ai")


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def model_name(executor: dict) -> str:
    """Inspect's '<provider>/<model>' for an endpoint fingerprint."""
    return f"{executor.get('backend') or 'unknown'}/{executor.get('model') or 'unknown'}"


def _arguments(text: str) -> tuple[dict[str, Any], str | None]:
    # The loop's strict reading: a hostile model's text (5000 digits, NaN, deep nesting) is a parse error.
    try:
        value = parse_arguments(text)
    except ArgumentsError as exc:
        return {}, f"arguments are not valid JSON: {exc}"
    return (value, None) if isinstance(value, dict) else ({}, "arguments are not a JSON object")


def messages(r: Rollout) -> list[ChatMessage]:
    """The rollout's messages as Inspect chat messages; what Inspect has no field for (the raw argument
    text, calls parsed from text) is in each message's metadata under 'evoaudit'."""
    executed = {c.call_id: c for c in r.calls}
    model = model_name(r.executor)
    out: list[ChatMessage] = []
    for i, msg in enumerate(r.messages):
        mid = f"{r.rollout_id}#{i}"
        text = msg.content or ""
        if msg.role == "system":
            out.append(ChatMessageSystem(id=mid, content=text, source="input"))
        elif msg.role == "user":
            out.append(ChatMessageUser(id=mid, content=text, source="input"))
        elif msg.role == "assistant":
            calls = []
            for tc in msg.tool_calls:
                args, error = _arguments(tc.arguments)
                done = executed.get(tc.id)
                if done is not None and done.args is not None:
                    args = done.args
                calls.append(ToolCall(id=tc.id, function=tc.name, arguments=args, parse_error=error))
            content: str | list = text
            if msg.reasoning:
                content = [ContentReasoning(reasoning=msg.reasoning), ContentText(text=text)]
            extra = {
                "content_null": msg.content is None,
                "raw_arguments": {tc.id: tc.arguments for tc in msg.tool_calls},
                "tool_calls_from_text": msg.tool_calls_from_text,
            }
            out.append(
                ChatMessageAssistant(
                    id=mid,
                    content=content,
                    tool_calls=calls or None,
                    model=model,
                    source="generate",
                    metadata={"evoaudit": extra},
                )
            )
        else:
            done = executed.get(msg.tool_call_id or "")
            error = ToolCallError("unknown", done.error) if done is not None and done.error else None
            out.append(
                ChatMessageTool(
                    id=mid, content=text, tool_call_id=msg.tool_call_id, function=msg.name, error=error
                )
            )
    return out


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(bool(value))


def scores(r: Rollout) -> dict[str, Score]:
    """Per-rollout scores (1.0 yes / 0.0 no, task_score 0-1); the decision record where APEX has one."""
    o = r.outcome
    values: dict[str, float | None] = {"utility": _flag(o.utility), "task_score": float(o.task_score)}
    if r.arm == "attacked":
        values.update(
            attack_success=_flag(o.attack_success),
            utility_under_attack=_flag(o.utility_under_attack),
            utility_under_attack_isolated=_flag(o.utility_under_attack_isolated),
            exposure=_flag(o.exposed),
            unauthorized_state_change=_flag(o.unauthorized_state_change),
            disclosure=_flag(o.disclosure),
        )
        values.update({f"harm_{c}": _flag(v) for c, v in sorted(o.harm.items())})
    decided: dict[str, CheckDecision | None] = {
        "attack_success": o.decisions.attack_success if o.decisions is not None else None,
        "exposure": o.decisions.exposure if o.decisions is not None else None,
    }
    out = {}
    for name, value in values.items():
        if value is None:
            continue
        decision = decided.get(name)
        out[name] = Score(
            value=value,
            answer=r.final_output if name in ("utility", "task_score") else None,
            metadata={"decision": decision.model_dump(mode="json")} if decision is not None else None,
        )
    return out


def sample(r: Rollout, simulator: bool) -> EvalSample:
    model = model_name(r.executor)
    msgs = messages(r)
    first_user = next((m.content for m in r.messages if m.role == "user"), "") or ""
    usage = ModelUsage(
        input_tokens=r.usage.prompt_tokens,
        output_tokens=r.usage.completion_tokens,
        total_tokens=r.usage.prompt_tokens + r.usage.completion_tokens,
    )
    o = r.outcome
    error = None
    if o.infra_failure:
        detail = f"{o.infra_failure}: {o.infra_failure_detail or ''}".rstrip(": ")
        error = EvalError(message=detail, traceback="", traceback_ansi="")
    return EvalSample(
        id=r.rollout_id,
        epoch=1,
        input=first_user,
        target="",
        messages=msgs,
        output=ModelOutput.from_content(model, r.final_output),
        scores=scores(r),
        metadata={
            "rollout_id": r.rollout_id,
            "lineage": r.lineage,
            "condition": r.condition,
            "arm": r.arm,
            "instance_id": r.instance_id,
            "family": r.family,
            "variant": r.variant,
            "split": r.split,
            "goal": r.goal,
            "seed": r.seed,
            "executor": r.executor,
            "artifact_sha256": r.artifact_sha256,
            "pre_state_sha256": r.pre_state_sha256,
            "injections": r.injections,
            "outcome": o.model_dump(mode="json"),
            "terminal_state": r.terminal_state,
            "retrieval": r.retrieval,
            "resume_key": r.resume_key,
            "usage": r.usage.model_dump(),
            "record_schema_version": r.schema_version,
            "simulator": simulator,
        },
        model_usage={model: usage},
        total_time=r.wall_s,
        error=error,
    )


def _results(g: Group, policy: str) -> EvalResults:
    """The group's rates by its suite's report metric functions (``report.suites``), over the rollouts the
    failure policy keeps; a rate with no denominator is left out."""
    rs = g.rollouts
    scoring = suite_metrics(g.suite)
    kept = scoring.scored(rs, policy)
    funcs = scoring.metrics(g.arm, rs)
    evals = []
    for name, fn in funcs.items():
        ratio = fn(kept)
        if not ratio.den:
            continue
        metric = EvalMetric(name="mean", value=ratio.value, params={"num": ratio.num, "den": ratio.den})
        evals.append(
            EvalScore(
                name=name,
                scorer=name,
                scored_samples=int(ratio.den),
                unscored_samples=len(rs) - int(ratio.den),
                metrics={"mean": metric},
                metadata={"function": f"{scoring.module}.{fn.__name__}", "failure_policy": policy},
            )
        )
    completed = sum(r.outcome.infra_failure is None for r in rs)
    return EvalResults(total_samples=len(rs), completed_samples=completed, scores=evals)


def _created(g: Group) -> str:
    newest = max(Path(s["path"]).stat().st_mtime for s in g.shards)
    return dt.datetime.fromtimestamp(newest, tz=dt.UTC).isoformat()


def _generate_config(executor: dict) -> GenerateConfig:
    sampling = executor.get("sampling") or {}
    keys = ("temperature", "max_tokens", "top_p", "seed")
    return GenerateConfig(**{k: sampling[k] for k in keys if sampling.get(k) is not None})


def eval_log(g: Group, policy: str, cfg_notice: str | None = None) -> EvalLog:
    """The Inspect log of one group (``cfg_notice``: the configuration's simulator notice, if any)."""
    if not g.rollouts:
        raise AuditError(f"no rollouts for {g.suite}/{g.lineage}/{g.condition}/{g.arm}")
    executors = [r.executor for r in g.rollouts]
    notice = records_sim_notice(executors, cfg_notice)
    simulator = notice is not None
    executor = executors[0]
    fingerprints = sorted({json.dumps(e, sort_keys=True) for e in executors})
    created = _created(g)
    key = json.dumps([g.suite, g.lineage, g.condition, g.arm, [s["sha256"] for s in g.shards]])
    digest = hashlib.sha256(key.encode()).hexdigest()
    provenance = {
        "suite": g.suite,
        "lineage": g.lineage,
        "condition": g.condition,
        "arm": g.arm,
        "record": "Rollout",
        "record_schema_version": SCHEMA_VERSION,
        "executor_fingerprints": [json.loads(f) for f in fingerprints],
        "shards": g.shards,
        "simulator": simulator,
        "simulator_notice": notice,
    }
    samples = [sample(r, fingerprint_is_sim(r.executor)) for r in g.rollouts]
    spec = EvalSpec(
        eval_id=digest[:22],
        run_id=digest[22:44],
        created=created,
        task=f"evoaudit/{g.suite}",
        # Per lineage: Inspect takes logs of one task id for retries and shows only the newest.
        task_id=hashlib.sha256(f"{g.suite}/{g.lineage}/{g.condition}/{g.arm}".encode()).hexdigest()[:22],
        task_version=SCHEMA_VERSION,
        task_display_name=f"evoaudit {g.suite} {g.lineage} {g.condition} {g.arm}",
        task_args={"lineage": g.lineage, "condition": g.condition, "arm": g.arm},
        solver="evoaudit.agent",
        solver_args={"condition": g.condition},
        tags=["evoaudit", g.suite, g.condition, g.arm] + (["simulator"] if simulator else []),
        dataset=EvalDataset(name=g.suite, samples=len(samples), sample_ids=[s.id for s in samples]),
        model=model_name(executor),
        model_generate_config=_generate_config(executor),
        model_base_url=executor.get("base_url"),
        model_args={"fingerprint": executor},
        config=EvalConfig(),
        packages={p: _version(p) for p in PACKAGES},
        metadata={"evoaudit": provenance},
    )
    total = ModelUsage()
    for r in g.rollouts:
        total.input_tokens += r.usage.prompt_tokens
        total.output_tokens += r.usage.completion_tokens
    total.total_tokens = total.input_tokens + total.output_tokens
    return EvalLog(
        version=2,
        status="success",
        eval=spec,
        plan=EvalPlan(name="evoaudit", steps=[EvalPlanStep(solver="evoaudit.agent", params=spec.task_args)]),
        results=_results(g, policy),
        stats=EvalStats(started_at=created, completed_at=created, model_usage={spec.model: total}),
        tags=list(spec.tags or []),
        metadata={"evoaudit": {"simulator": simulator, "simulator_notice": notice}},
        samples=samples,
    )


def log_name(g: Group) -> str:
    parts = (g.suite, g.lineage, g.condition, g.arm)
    return "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", p) for p in parts) + ".eval"


def export_inspect(cfg: Config, results: Path, out: Path, fmt: str = "eval") -> list[Path]:
    """Write one Inspect log per (suite, lineage, condition, arm) found under ``results``; returns them."""
    groups = grouped(results, cfg.suite.name)
    if not groups:
        raise AuditError(
            f"no evaluation shards under {results}/evaluate or {results}/apex/runs - pass --results pointing "
            "at the directory the workflow wrote"
        )
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for g in groups:
        scoring = suite_metrics(g.suite)
        policy = scoring.policy(cfg)
        path = out / log_name(g)
        if fmt == "json":
            path = path.with_suffix(".json")
        notice = scoring.notice(cfg)
        write_eval_log(eval_log(g, policy, notice), path.as_posix(), format=fmt)
        written.append(path)
    return written
