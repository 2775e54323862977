"""The rollout table: one typed row per evaluation rollout, written as parquet by the report stages.

Each row (``RolloutRow``) holds the rollout's ids, every outcome field flattened into its own typed column
(one ``harm_<category>`` column per harm category of the suite), counts, tokens, the infrastructure failure
class. Wall time and the artifact's sha256 are left out, so that the table, like every report table, is
byte-identical for the same config and cache, a resumed run included (an artifact's bytes still carry its
acquisition record's timing); both stay in each rollout's record, as
do messages, tool calls and terminal states (``evoaudit show``, ``evoaudit export inspect``). The file's
metadata says which record and schema version it holds, the harm categories, and, on a simulator run, the
simulator notice.

``rollouts_from_table`` turns rows back into ``Rollout`` records carrying everything the report's metric
functions read, so a table computed from the parquet file alone uses the very functions the report uses.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from evoaudit.errors import AuditError
from evoaudit.records import Decisions, Outcome, Rollout, Usage

# Version 2: the defence and runner-profile columns (defense, agent_profile, max_steps).
# Version 3: utility_under_attack is AgentDojo's (the real terminal state); the variant with the attacker's
# effects taken back first is utility_under_attack_isolated.
ROLLOUT_TABLE_SCHEMA_VERSION = 3
HARM_PREFIX = "harm_"
META_KEY = b"evoaudit"
NOTICE_KEY = b"evoaudit.simulator_notice"


class RolloutRow(BaseModel):
    """One evaluation rollout as a row of ``tables/rollouts.parquet`` (harm flags are added beside it)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: int = ROLLOUT_TABLE_SCHEMA_VERSION
    """Version of this row layout; a reader refuses a version it does not know."""
    rollout_id: str
    """The rollout's id, '<lineage>/<condition>/<arm>/<instance>/<goal or none>'."""
    suite: str
    """The audited suite ('banking', 'apex')."""
    lineage: str
    """Lineage (an independent end-to-end repetition); APEX: the repeat."""
    condition: str
    """Condition (artifact and insertion); APEX: the audited model."""
    arm: str
    """'benign' or 'attacked'."""
    instance_id: str
    """Instance '<family>.<variant>'."""
    family: str
    """Task family (Banking user task; APEX task)."""
    variant: str
    """Variant of the family (v0..v5)."""
    split: str
    """'seen' or 'unseen' family."""
    goal: str | None
    """Injection goal (Banking injection task; APEX attack id); empty on benign rollouts."""
    seed: int
    """The episode's seed (shared across conditions: common random numbers)."""
    executor_backend: str | None
    """Backend of the executor endpoint ('sim', 'sim-apex', 'openai')."""
    executor_model: str | None
    """Model id the executor endpoint was asked for."""
    executor_base_url: str | None
    """Base URL of the executor endpoint (credentials redacted), where it has one."""
    executor_fingerprint: str
    """The full endpoint fingerprint as JSON (served models, server version, sampling)."""
    pre_state_sha256: str
    """sha256 of the environment state the episode started from."""
    injection_vectors: list[str]
    """Vectors injected text was placed in (sorted)."""
    utility: bool
    """The corrected checker accepts the terminal state (task_score == 1)."""
    task_score: float
    """The user's task, 0-1 (a rubric's mean on APEX; 1.0 or 0.0 on Banking)."""
    attack_success: bool | None
    """The injection goal was achieved; empty on benign rollouts."""
    utility_under_attack: bool | None
    """Attacked rollouts: AgentDojo's utility under attack, the user's task checked on the real terminal
    state (the attacker's effects left in place); empty on benign ones."""
    utility_under_attack_isolated: bool | None
    """Attacked rollouts: evoaudit's variant, the user's task checked with the attacker's effects taken back
    first; empty on benign ones and where the suite does not define it."""
    exposed: bool | None
    """Injected text reached a model-visible message; empty where the suite leaves exposure undefined."""
    unauthorized_state_change: bool
    """The terminal state holds a change the user did not authorise."""
    disclosure: bool | None
    """Sensitive data was disclosed; empty where the goal does not define disclosure."""
    textual_action: bool
    """A tool call was written as text instead of being called."""
    tool_calls: int
    """Real tool calls the agent made (the count the interface metrics use)."""
    read_calls: int
    """Of those, calls to read-only tools."""
    steps: int
    """Model turns."""
    step_limit_hit: bool
    """The episode ended at the step limit."""
    infra_failure: str | None
    """Infrastructure failure class when the episode did not finish (e.g. retries_exhausted)."""
    infra_failure_detail: str | None
    """The server's answer for that failure (trimmed, secrets redacted)."""
    attack_success_decided_by: str | None
    """APEX: who decided attack success (rule, judge, undecided, not_applicable); empty elsewhere."""
    exposure_decided_by: str | None
    """APEX: who decided exposure; empty elsewhere."""
    decisions: str | None
    """APEX: the outcome's full decision record as JSON; empty elsewhere."""
    n_messages: int
    """Messages in the conversation (system, user, assistant, tool)."""
    n_calls: int
    """Executed call records (including calls with malformed arguments)."""
    n_call_errors: int
    """Executed calls that returned an error."""
    prompt_tokens: int
    """Prompt tokens over the episode's requests."""
    completion_tokens: int
    """Completion tokens over the episode's requests."""
    requests: int
    """Model requests made."""
    retrieval: str | None
    """Retrieval-based conditions: what was retrieved, with provenance, as JSON; empty otherwise."""
    final_output: str
    """The agent's final message."""
    defense: str | None
    """The defence the episode ran under (``defenses``); empty for the undefended protocol."""
    agent_profile: str | None
    """The runner profile the episode ran under (``agent.profile``); empty for the default profile."""
    max_steps: int | None
    """The runner profile's turn limit; empty for the default profile."""


_ARROW = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64()}


def _arrow_type(annotation: Any) -> pa.DataType:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return _arrow_type(args[0])
    if typing.get_origin(annotation) is list:
        return pa.list_(_arrow_type(args[0]))
    return _ARROW[annotation]


def arrow_schema(harm_categories: list[str]) -> pa.Schema:
    """The table's columns: RolloutRow's fields (each with its docstring), then one nullable harm flag per
    category (empty where the record has no flag for it; the harm metric counts that as False)."""
    fields = [
        pa.field(name, _arrow_type(f.annotation), metadata={"description": f.description or ""})
        for name, f in RolloutRow.model_fields.items()
    ]
    fields += [
        pa.field(f"{HARM_PREFIX}{c}", pa.bool_(), metadata={"description": f"harm category {c}"})
        for c in harm_categories
    ]
    return pa.schema(fields)


def _json(value: Any) -> str | None:
    return json.dumps(value, sort_keys=True) if value else None


def row(r: Rollout, suite: str) -> RolloutRow:
    o, ex, d = r.outcome, r.executor, r.outcome.decisions
    return RolloutRow(
        rollout_id=r.rollout_id,
        suite=suite,
        lineage=r.lineage,
        condition=r.condition,
        arm=r.arm,
        instance_id=r.instance_id,
        family=r.family,
        variant=r.variant,
        split=r.split,
        goal=r.goal,
        seed=r.seed,
        executor_backend=ex.get("backend"),
        executor_model=ex.get("model"),
        executor_base_url=ex.get("base_url"),
        executor_fingerprint=json.dumps(ex, sort_keys=True),
        pre_state_sha256=r.pre_state_sha256,
        injection_vectors=sorted(r.injections),
        utility=o.utility,
        task_score=o.task_score,
        attack_success=o.attack_success,
        utility_under_attack=o.utility_under_attack,
        utility_under_attack_isolated=o.utility_under_attack_isolated,
        exposed=o.exposed,
        unauthorized_state_change=o.unauthorized_state_change,
        disclosure=o.disclosure,
        textual_action=o.textual_action,
        tool_calls=o.tool_calls,
        read_calls=o.read_calls,
        steps=o.steps,
        step_limit_hit=o.step_limit_hit,
        infra_failure=o.infra_failure,
        infra_failure_detail=o.infra_failure_detail,
        attack_success_decided_by=d.attack_success.decided_by if d is not None and d.attack_success else None,
        exposure_decided_by=d.exposure.decided_by if d is not None and d.exposure else None,
        decisions=_json(d.model_dump(mode="json") if d is not None else None),
        n_messages=len(r.messages),
        n_calls=len(r.calls),
        n_call_errors=sum(c.error is not None for c in r.calls),
        prompt_tokens=r.usage.prompt_tokens,
        completion_tokens=r.usage.completion_tokens,
        requests=r.usage.requests,
        retrieval=_json(r.retrieval),
        final_output=r.final_output,
        defense=r.defense,
        agent_profile=r.agent_profile,
        max_steps=r.max_steps,
    )


def rollout_table(rollouts: list[Rollout], suite: str, notice: str | None = None) -> pa.Table:
    """The rollouts as an arrow table in id order, with the record, schema and notice in its metadata."""
    rollouts = sorted(rollouts, key=lambda r: r.rollout_id)
    harm = sorted({c for r in rollouts for c in r.outcome.harm})
    rows = []
    for r in rollouts:
        d = row(r, suite).model_dump()
        d.update({f"{HARM_PREFIX}{c}": r.outcome.harm.get(c) for c in harm})
        rows.append(d)
    table = pa.Table.from_pylist(rows, schema=arrow_schema(harm))
    meta = {
        "record": "RolloutRow",
        "schema_version": ROLLOUT_TABLE_SCHEMA_VERSION,
        "suite": suite,
        "harm_categories": harm,
        "simulator": notice is not None,
        "simulator_notice": notice,
    }
    extra = {META_KEY: json.dumps(meta, sort_keys=True).encode()}
    if notice:
        extra[NOTICE_KEY] = notice.encode()
    return table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})


def write_rollout_table(rollouts: list[Rollout], path: Path, suite: str, notice: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rollout_table(rollouts, suite, notice), path)
    return path


def table_metadata(path: Path) -> dict[str, Any]:
    """The evoaudit block of a rollout table's parquet metadata; refuses other files and other versions."""
    raw = (pq.read_schema(path).metadata or {}).get(META_KEY)
    if raw is None:
        raise AuditError(f"{path}: not a rollout table (no evoaudit metadata) - rebuild it with the report")
    meta = json.loads(raw)
    if meta.get("record") != "RolloutRow" or meta.get("schema_version") != ROLLOUT_TABLE_SCHEMA_VERSION:
        raise AuditError(
            f"{path}: rollout table record {meta.get('record')} version {meta.get('schema_version')}, this "
            f"code reads RolloutRow version {ROLLOUT_TABLE_SCHEMA_VERSION} - rerun the report stage"
        )
    return meta


def read_rollout_table(path: Path) -> pd.DataFrame:
    """The table as a DataFrame with nullable dtypes (booleans stay booleans where a value is empty)."""
    table_metadata(path)
    return pd.read_parquet(path, dtype_backend="numpy_nullable")


def _opt(v: Any) -> Any:
    return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v


def rollouts_from_table(frame: pd.DataFrame) -> list[Rollout]:
    """Rollout records rebuilt from table rows: ids, outcome, usage and timing, without messages, calls or
    terminal state (the shards keep those). What the report's metrics read is all there."""
    harm_cols = [c for c in frame.columns if c.startswith(HARM_PREFIX)]
    out = []
    for rec in frame.to_dict("records"):
        rec = {k: _opt(v) for k, v in rec.items()}
        outcome = Outcome(
            utility=bool(rec["utility"]),
            task_score=float(rec["task_score"]),
            attack_success=rec["attack_success"],
            utility_under_attack=rec["utility_under_attack"],
            utility_under_attack_isolated=rec["utility_under_attack_isolated"],
            exposed=rec["exposed"],
            harm={c[len(HARM_PREFIX) :]: bool(rec[c]) for c in harm_cols if rec[c] is not None},
            unauthorized_state_change=bool(rec["unauthorized_state_change"]),
            disclosure=rec["disclosure"],
            textual_action=bool(rec["textual_action"]),
            tool_calls=int(rec["tool_calls"]),
            read_calls=int(rec["read_calls"]),
            steps=int(rec["steps"]),
            step_limit_hit=bool(rec["step_limit_hit"]),
            infra_failure=rec["infra_failure"],
            infra_failure_detail=rec["infra_failure_detail"],
            decisions=Decisions.model_validate_json(rec["decisions"]) if rec["decisions"] else None,
        )
        out.append(
            Rollout(
                rollout_id=rec["rollout_id"],
                lineage=rec["lineage"],
                condition=rec["condition"],
                arm=rec["arm"],
                instance_id=rec["instance_id"],
                family=rec["family"],
                variant=rec["variant"],
                split=rec["split"],
                goal=rec["goal"],
                seed=int(rec["seed"]),
                executor=json.loads(rec["executor_fingerprint"]),
                pre_state_sha256=rec["pre_state_sha256"],
                messages=[],
                calls=[],
                final_output=rec["final_output"],
                terminal_state={},
                outcome=outcome,
                usage=Usage(
                    prompt_tokens=int(rec["prompt_tokens"]),
                    completion_tokens=int(rec["completion_tokens"]),
                    requests=int(rec["requests"]),
                ),
                retrieval=json.loads(rec["retrieval"]) if rec["retrieval"] else None,
                defense=rec["defense"],
                agent_profile=rec["agent_profile"],
                max_steps=None if rec["max_steps"] is None else int(rec["max_steps"]),
            )
        )
    return out
