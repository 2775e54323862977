"""Rollout records built by hand with only what the report reads filled in (shared by the report and method
tests)."""

from __future__ import annotations

from evoaudit.records import ExecutedCall, Message, Outcome, Rollout


def mk(
    lineage: str = "L1",
    condition: str = "static",
    arm: str = "attacked",
    family: str = "user_task_0",
    variant: str = "v3",
    goal: str | None = "injection_task_0",
    *,
    utility: bool = False,
    success: bool = False,
    exposed: bool = False,
    unauth: bool = False,
    harm: dict[str, bool] | None = None,
    split: str = "seen",
    tool_calls: int = 1,
    read_calls: int = 0,
    textual: bool = False,
    infra: str | None = None,
    messages: list[Message] | None = None,
    calls: list[ExecutedCall] | None = None,
    injections: dict[str, str] | None = None,
) -> Rollout:
    """A rollout record with only what the report reads filled in."""
    if arm == "benign":
        goal = None
    harm = harm if harm is not None else {"unauthorized_transfer": unauth}
    return Rollout(
        rollout_id=f"{lineage}/{condition}/{arm}/{family}.{variant}/{goal or 'none'}",
        lineage=lineage,
        condition=condition,
        arm=arm,
        instance_id=f"{family}.{variant}",
        family=family,
        variant=variant,
        split=split,
        goal=goal,
        seed=0,
        executor={"backend": "sim", "model": "test"},
        injections=injections or {},
        pre_state_sha256="0" * 64,
        messages=messages or [],
        calls=calls or [],
        terminal_state={},
        outcome=Outcome(
            utility=utility,
            attack_success=None if arm == "benign" else success,
            exposed=exposed,
            harm=harm,
            unauthorized_state_change=unauth,
            textual_action=textual,
            tool_calls=tool_calls,
            read_calls=read_calls,
            infra_failure=infra,
        ),
    )
