"""``evoaudit score``: the episodes an outside agent ran on a served AgentDojo instance, scored as the
workflow scores its own.

The record holds the calls and the submitted answer, not the agent's conversation. Scoring rebuilds the
episode the workflow's loop would have recorded for the same calls: the environment from the suite's own
``build_environment`` (injections placed), each call re-run through the session the loop uses
(``open_tools``) and checked against the recorded text and error, the terminal state's digest checked, and
the conversation as the loop writes it (the system prompt and the user's request, one assistant turn per
call, the tool's text or error as the tool message, the submitted answer as the final assistant message).
The outcome is then the evaluator's own (``evaluate.outcome.compute_outcome``: the suite's task check,
goal check, exposure, harm and disclosure); nothing here computes a metric.

What an MCP server cannot see is taken as the loop's one-call-per-turn shape: ``steps`` is the number of
calls plus the final turn, ``textual_action`` is False, and no step or time limit was hit.
"""

from __future__ import annotations

import json
from typing import Any

from evoaudit.agent.loop import Episode
from evoaudit.agent.prompt import opening_messages
from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.evaluate.outcome import compute_outcome
from evoaudit.evaluate.served.instance import ServedInstance
from evoaudit.evaluate.served.record import AgentServedCall, AgentServedEpisode, AgentServedRecord
from evoaudit.records import ExecutedCall, Message, Outcome, ToolCall


def check_match(served: ServedInstance, record: AgentServedRecord, source: str) -> None:
    """Refuse a record served from another instance, goal, prompt or configuration than ``served``."""
    pairs = {
        "suite": (record.suite, served.suite.name),
        "instance_id": (record.instance_id, served.instance.instance_id),
        "goal": (record.goal, served.goal),
        "injections": (record.injections, dict(served.injections)),
        "system_prompt": (record.system_prompt, served.system),
        "artifact_sha256": (record.artifact_sha256, served.artifact_sha256),
        "config_sha256": (record.config_sha256, served.config_sha256),
    }
    for field, (got, want) in pairs.items():
        if got != want:
            raise AuditError(
                f"{source}: field {field!r} differs from the instance rebuilt here; score with the "
                "configuration (and --condition/--artifact) the server used"
            )


def episode_of(served: ServedInstance, ep: AgentServedEpisode, where: str) -> tuple[Any, Any, Episode]:
    """(pre-state, terminal state, ``agent.loop.Episode``) of a recorded episode, re-run on the environment
    the workflow builds; AuditError naming the call where the re-run differs from the record."""
    suite = served.suite
    env = served.build_environment()
    pre = suite.copy_environment(env)
    if suite.state_sha256(pre) != ep.pre_state_sha256:
        raise AuditError(f"{where}: the environment built here is not the one served (pre_state_sha256)")
    session = suite.open_tools(env, None)
    try:
        for c in ep.calls:
            if session.call(c.function, dict(c.args)) != (c.result, c.error):
                raise AuditError(f"{where}: call {c.seq} ({c.function}) re-ran differently from the record")
    finally:
        session.close()
    if suite.state_sha256(env) != ep.state_sha256:
        raise AuditError(f"{where}: the terminal state differs from the record's (state_sha256)")
    return pre, env, episode_from_calls(served.system, served.prompt, ep.calls, ep.final_output)


def episode_from_calls(
    system: str, prompt: str, served_calls: list[AgentServedCall], final_output: str | None
) -> Episode:
    """The ``agent.loop.Episode`` the workflow's loop records for these calls, made one per turn: the
    opening messages, an assistant turn and a tool message per call (the error's text when the call
    failed, as the loop shows it), and ``final_output`` as the last assistant message."""
    messages = opening_messages(system, prompt)
    calls: list[ExecutedCall] = []
    for c in served_calls:
        call_id = f"call_{c.seq}"
        messages.append(
            Message(
                role="assistant",
                tool_calls=[ToolCall(id=call_id, name=c.function, arguments=json.dumps(c.args))],
            )
        )
        messages.append(
            Message(role="tool", tool_call_id=call_id, name=c.function, content=c.error or c.result)
        )
        calls.append(
            ExecutedCall(
                call_id=call_id,
                function=c.function,
                args=c.args,
                error=c.error,
                result="" if c.error else c.result,
            )
        )
    final = final_output or ""
    messages.append(Message(role="assistant", content=final))
    return Episode(messages=messages, calls=calls, final_output=final, steps=len(calls) + 1)


def score_episode(served: ServedInstance, record: AgentServedRecord, ep: AgentServedEpisode) -> Outcome:
    """The episode's outcome as the evaluator computes it."""
    where = f"{record.instance_id}/{record.goal or 'none'} episode {ep.episode}"
    pre, post, episode = episode_of(served, ep, where)
    return compute_outcome(served.suite, served.instance, served.goal, served.injections, pre, post, episode)


def score_record(
    served: ServedInstance, record: AgentServedRecord, episode: int | None = None
) -> list[dict[str, Any]]:
    """One row per episode with calls or an answer (or for ``episode`` alone): its number and outcome."""
    if episode is not None:
        chosen = [e for e in record.episodes if e.episode == episode]
        if not chosen:
            raise AuditError(f"--episode {episode}: the record holds episodes 0..{len(record.episodes) - 1}")
    else:
        chosen = [e for e in record.episodes if e.calls or e.final_output is not None]
    return [
        {"episode": e.episode, "outcome": score_episode(served, record, e).model_dump(mode="json")}
        for e in chosen
    ]


def score_file(
    cfg: Config,
    path: str,
    condition_name: str | None = None,
    artifact_dir: str | None = None,
    episode: int | None = None,
    json_out: str | None = None,
) -> list[dict[str, Any]]:
    """Score the record at ``path`` under ``cfg``: print one line per episode, and with ``json_out`` write
    ``{record, suite, instance_id, goal, episodes: [{episode, outcome}]}`` there."""
    from evoaudit import atomic
    from evoaudit.evaluate.served.instance import served_instance
    from evoaudit.evaluate.served.record import read_record

    record = read_record(path)
    if record.suite != cfg.suite.name:
        raise AuditError(
            f"{path}: field 'suite' is {record.suite!r}, the configuration's suite.name is "
            f"{cfg.suite.name!r}; score with the configuration the server used"
        )
    served = served_instance(cfg, record.instance_id, record.goal, condition_name, artifact_dir)
    check_match(served, record, str(path))
    rows = score_record(served, record, episode)
    for row in rows:
        o = row["outcome"]
        print(
            f"episode {row['episode']}: utility {o['utility']}, exposed {o['exposed']}, attack success "
            f"{o['attack_success']}, unauthorised state change {o['unauthorized_state_change']}, harm "
            f"{o['harm']}"
        )
    if json_out:
        doc = {
            "record": str(path),
            "suite": record.suite,
            "instance_id": record.instance_id,
            "goal": record.goal,
            "episodes": rows,
        }
        atomic.write_text(json_out, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return rows
