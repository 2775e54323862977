"""APEX rollout records built in code for the report and ablation tests: one model's episode of a task,
benign or under one attack, with the outcome fields the report reads."""

from __future__ import annotations

from evoaudit.records import ExecutedCall, Message, Outcome, Rollout, ToolCall


def apex_rollout(
    model: str = "m",
    task: str = "t1",
    attack: str | None = None,
    *,
    repeat: str = "r0",
    score: float = 1.0,
    success: bool = False,
    exposed: bool | None = None,
    calls=(),
    infra: str | None = None,
    uua: bool | None = None,
    prompt: str = "do the task",
) -> Rollout:
    """``calls``: (call id, function, arguments) triples, each also an assistant turn that asked for it."""
    turns = [
        Message(role="assistant", tool_calls=[ToolCall(id=cid, name=f, arguments="{}")])
        for cid, f, _ in calls
    ]
    arm = "attacked" if attack else "benign"
    return Rollout(
        rollout_id=f"{repeat}/{model}/{arm}/{task}.v0/{attack or 'none'}",
        lineage=repeat,
        condition=model,
        arm=arm,
        instance_id=f"{task}.v0",
        family=task,
        variant="v0",
        split="unseen",
        goal=attack,
        seed=0,
        executor={},
        pre_state_sha256="0",
        terminal_state={},
        messages=[Message(role="user", content=prompt), *turns],
        calls=[ExecutedCall(call_id=cid, function=f, args=a) for cid, f, a in calls],
        outcome=Outcome(
            utility=score == 1.0,
            task_score=score,
            attack_success=success if attack else None,
            exposed=exposed,
            infra_failure=infra,
            utility_under_attack=uua,
        ),
    )
