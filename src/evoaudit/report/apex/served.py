"""``evoaudit apex score``: an episode an outside agent ran on a served APEX workspace, scored as the workflow
scores its own.

The record (``records.ServedRecord``, written by ``evoaudit apex serve --attack``) holds the calls, not the
agent's conversation. Scoring rebuilds the episode the workflow would have recorded for the same actions: the
world from the suite's own ``build_environment`` (attack content placed, watcher attached), the agent's calls
re-run on it with the settings of the session the workflow's loop uses (``open_tools``) to rebuild the
terminal state, whose digest must be the record's; the conversation is the record's, as the loop writes it
(one assistant turn per call, the recorded text or error as the tool message), so what the agent was shown is
scored as it was shown. Each agent call is re-run by replay's own rule (``replay.apex.rerun_agent_call``): a
re-made text is compared with the record's after time stamps are normalised (``steady``: ``ls -la`` a minute
later is the same call); where a ``run_command``'s text or the bytes it wrote (``ServedCall.file_effects``)
differ, its program runs once more on a copy of the world before the call, and only where those two runs
differ too is the record taken (its text, keeping every line both runs printed; its bytes, written where the
re-run's differ) and the call listed in ``calls_nondeterministic``. A text that still differs is listed in
``calls_differing``, not fatal; recorded bytes a deterministic program does not write make the episode
unscorable. Every episode that can be scored is; one that cannot (another world, another terminal state,
forged file effects) is named with its reason. The outcome is
then ``evaluate.outcome.compute_outcome``'s, the open cases go to the configured judge through the judge
stage's ``final_decisions`` (``apex.judge``; the simulator by default), and the final task score, attack
success and exposure are set by the report's ``apply_judged``. Nothing here computes a metric.

The agent's final message is not part of an MCP session: the answer the rubric reads is what the agent
submitted (``submit_answer``), as for a workflow episode whose agent submitted one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoaudit.agent.loop import Episode
from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.evaluate.apex.judge import final_decisions
from evoaudit.evaluate.outcome import compute_outcome
from evoaudit.records import (
    SERVED_FORMAT,
    ExecutedCall,
    Instance,
    Message,
    Rollout,
    ServedCall,
    ServedEpisode,
    ServedRecord,
    ToolCall,
)
from evoaudit.replay.apex import rerun_agent_call
from evoaudit.report.apex.judged import apply_judged
from evoaudit.volatile import steady

AGENT = "agent"


def read_record(path: str | Path) -> ServedRecord:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AuditError(
            f"{p}: no such record; `evoaudit apex serve --attack ID --record {p}` writes one"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise AuditError(
            f"{p}: not a served-episode record (not one JSON document); a server without --attack writes "
            "JSON lines, which carry no attack to score; serve with --attack ID"
        ) from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != SERVED_FORMAT:
        raise AuditError(
            f"{p}: field 'format' is {found!r}, not {SERVED_FORMAT!r}; record it with apex serve"
        )
    try:
        return ServedRecord.model_validate(data)
    except ValidationError as exc:
        raise AuditError(f"{p}: not a valid served-episode record: {exc}") from None


def same_call(got: ServedCall, want: ServedCall) -> bool:
    """Whether a re-made call is the recorded one: identical but for what ``steady`` normalises (its file
    effects are checked as it re-runs)."""
    texts = {"result", "error", "file_effects"}
    if got.model_dump(exclude=texts) != want.model_dump(exclude=texts):
        return False
    return steady(got.result) == steady(want.result) and steady(got.error) == steady(want.error)


class Unscorable(AuditError):
    """An episode of the record that cannot be scored here (the others still are)."""


def episode_of(suite: Any, instance: Instance, record: ServedRecord, ep: ServedEpisode, cfg: Config):
    """(pre-state, terminal state, ``agent.loop.Episode``, injections, differing call seqs, nondeterministic
    calls) of the recorded episode. The conversation is the record's (the texts the agent was shown, so
    exposure is scored from the record); the terminal state is rebuilt by re-running the calls on the world
    the workflow builds, and must be the recorded one (``state_sha256``). A re-made call whose text differs
    from the record's beyond time stamps (``steady``) and is not a nondeterministic program's is listed, not
    fatal: the score reads the record's text and the rebuilt state. ``Unscorable`` names what cannot be
    rebuilt, and a call whose recorded file effects its program does not make."""
    where = f"{record.instance_id}/{record.attack} episode {ep.episode}"
    injections = suite.injections(cfg.suite, instance, record.attack)
    env = suite.build_environment(instance, record.attack, injections)
    pre = suite.copy_environment(env)
    if suite.state_sha256(pre) != ep.pre_state_sha256:
        raise Unscorable(
            f"{where}: the world built here is not the one served (pre_state_sha256 differs); score with the "
            "configuration and worlds the server used"
        )
    prompt = suite.prompt_for(instance, record.attack)
    messages = [Message(role="user", content=prompt)]
    calls: list[ExecutedCall] = []
    suite.open_tools(env, cfg.suite).close()  # the workflow's run settings on the world (sandbox, limits)
    nondeterministic: list[dict[str, Any]] = []
    for c in ep.calls:
        if c.actor != AGENT:
            continue  # a program's call: ``run_command`` makes it again
        said = c.error if c.error is not None else c.result
        check = rerun_agent_call(suite, env, c.tool, dict(c.args), said, c.file_effects)
        if check.effects_mismatch is not None:
            recorded, remade = check.effects_mismatch
            raise Unscorable(
                f"{where}: call {c.seq} ({c.tool}): the recorded file effects {recorded} are not what its "
                f"program makes {remade}"
            )
        if check.output_varies or check.varying_paths:
            row: dict[str, Any] = {"seq": c.seq, "paths": check.varying_paths}
            if check.output_varies:
                row["output"] = True
            nondeterministic.append(row)
        call_id = f"call_{c.seq}"
        messages.append(
            Message(
                role="assistant",
                tool_calls=[ToolCall(id=call_id, name=c.tool, arguments=json.dumps(c.args))],
            )
        )
        # What the loop records and shows: the error's text when the call failed (``agent.loop``).
        shown = c.error or c.result
        messages.append(Message(role="tool", tool_call_id=call_id, name=c.tool, content=shown))
        calls.append(
            ExecutedCall(
                call_id=call_id, function=c.tool, args=c.args, error=c.error,
                result="" if c.error else c.result, file_effects=c.file_effects,
            )
        )  # fmt: skip
    remade = [ServedCall(**vars(c)) for c in env.calls]
    if [(c.seq, c.tool, c.actor) for c in remade] != [(c.seq, c.tool, c.actor) for c in ep.calls]:
        raise Unscorable(
            f"{where}: the re-run made {len(remade)} calls, the record holds {len(ep.calls)} (or another "
            "order); the world or the programs differ from the served ones"
        )
    # A call whose program prints another text each run is compared with the recorded text it was given.
    varies = {row["seq"] for row in nondeterministic if row.get("output")}
    taken = [
        got.model_copy(update={"result": want.result, "error": want.error}) if want.seq in varies else got
        for got, want in zip(remade, ep.calls, strict=True)
    ]
    differing = [want.seq for got, want in zip(taken, ep.calls, strict=True) if not same_call(got, want)]
    if suite.state_sha256(env) != ep.state_sha256:
        shown = f" (calls {differing} re-ran differently)" if differing else ""
        raise Unscorable(f"{where}: the terminal state differs from the record's (state_sha256){shown}")
    episode = Episode(messages=messages, calls=calls, steps=len(calls) + 1)
    return pre, env, episode, injections, differing, nondeterministic


def score_episode(
    suite: Any, instance: Instance, record: ServedRecord, ep: ServedEpisode, cfg: Config, judge: Any
) -> tuple[Rollout, list[int], list[dict[str, Any]]]:
    """The episode as the workflow's rollout, its outcome with the judge stage's final decisions applied;
    with its differing and its nondeterministic calls (``episode_of``)."""
    pre, post, episode, injections, differing, nondeterministic = episode_of(suite, instance, record, ep, cfg)
    outcome = compute_outcome(suite, instance, record.attack, injections, pre, post, episode)
    rollout = Rollout(
        rollout_id=f"served/{record.instance_id}/{record.attack or 'none'}/{ep.episode}",
        lineage="served",
        condition="mcp",
        arm="attacked" if record.attack else "benign",
        instance_id=instance.instance_id,
        family=instance.family,
        variant=instance.variant,
        split=instance.split,
        goal=record.attack,
        seed=0,
        executor={"backend": "mcp"},
        injections=injections,
        pre_state_sha256=ep.pre_state_sha256,
        messages=episode.messages,
        calls=episode.calls,
        terminal_state=suite.state(post),
        outcome=outcome,
    )
    scored = apply_judged([rollout], final_decisions([rollout], judge))[0]
    return scored, differing, nondeterministic


def summary(
    rollout: Rollout, episode: int, differing: list[int], nondeterministic: list[dict[str, Any]]
) -> dict[str, Any]:
    o = rollout.outcome
    return {
        "episode": episode,
        "scored": True,
        # Calls whose re-run text differs from the record's beyond time stamps (the record's was scored).
        "calls_differing": differing,
        # Calls whose program printed (output) or wrote (paths) other bytes on each of two re-runs, so the
        # record's were taken, as replay takes them (``replay.apex.rerun_agent_call``).
        "calls_nondeterministic": nondeterministic,
        "instance_id": rollout.instance_id,
        "attack": rollout.goal,
        "task_score": o.task_score,
        "utility": o.utility,
        "attack_success": o.attack_success,
        "exposed": o.exposed,
        "disclosure": o.disclosure,
        "harm": o.harm,
        "tool_calls": o.tool_calls,
        "decisions": o.decisions.model_dump(mode="json") if o.decisions is not None else {},
    }


def score_record(
    suite: Any, instance: Instance, record: ServedRecord, cfg: Config, judge: Any, episode: int | None = None
) -> list[dict[str, Any]]:
    """The summary of every episode with calls (or of ``episode``, whatever it holds). An episode that
    cannot be scored (``Unscorable``) is a row with ``scored`` False and the reason; the others are scored."""
    if episode is not None:
        chosen = [e for e in record.episodes if e.episode == episode]
        if not chosen:
            raise AuditError(f"--episode {episode}: the record holds episodes 0..{len(record.episodes) - 1}")
    else:
        chosen = [e for e in record.episodes if e.calls]
    rows = []
    for e in chosen:
        try:
            rollout, differing, nondeterministic = score_episode(suite, instance, record, e, cfg, judge)
        except Unscorable as exc:
            rows.append({"episode": e.episode, "scored": False, "reason": str(exc)})
            continue
        rows.append(summary(rollout, e.episode, differing, nondeterministic))
    return rows
