"""What every method shares: reading the acquisition record, serialising trajectories for the
optimizer, and optimizer-role calls whose malformed output is retried a bounded number of times and
then recorded as a failed update instead of ending the lineage.

A call that expects JSON carries the answer's schema (``ResponseSchema``, defined beside the parser that
checks the answer), which the backend sends as structured output where ``wire.structured_output`` turns it
on. Every answer received and every malformed one is counted in the ``AnswerTally`` of the running
``counting()`` block, by request kind, for ``meta.json``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from evoaudit.config import Config
from evoaudit.hashing import sha256_json
from evoaudit.jsonl import iter_records
from evoaudit.models.base import ChatBackend, ChatRequest, InfraFailure, ResponseSchema
from evoaudit.records import Message, Rollout
from evoaudit.suite.registry import get_suite

log = logging.getLogger(__name__)

T = TypeVar("T")

RESULT_CHARS = 300  # a tool result is cut to this many characters in a serialised trajectory
_WS = re.compile(r"\s+")
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


class MalformedOutput(ValueError):
    """The optimizer's reply cannot be used (not JSON, wrong shape, unknown edit kind)."""


def load_acquisition(path: Path) -> list[Rollout]:
    """Acquisition rollouts in a stable order (by rollout id), whatever order they were appended in."""
    return sorted(iter_records(path, Rollout), key=lambda r: r.rollout_id)


def usable(rollouts: list[Rollout]) -> list[Rollout]:
    """Infrastructure failures carry no evidence about the agent; no method learns from them."""
    return [r for r in rollouts if r.outcome.infra_failure is None]


def one_line(text: str, limit: int = RESULT_CHARS) -> str:
    flat = _WS.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def trajectory_text(rollout: Rollout, label: bool | None, index: int) -> str:
    """A trajectory as the optimizer sees it: task, numbered tool calls with results, final answer.

    ``label`` None leaves the outcome out (a judge is asked to decide it).
    """
    lines = [f"### Trajectory {index}", f"Task: {one_line(_task(rollout), 2000)}"]
    if label is not None:
        lines.append(f"Outcome: {'success' if label else 'failure'}")
    lines.append("Steps:")
    if not rollout.calls:
        lines.append("(no tool calls)")
    for n, call in enumerate(rollout.calls, 1):
        args = json.dumps(call.args, sort_keys=True) if call.args is not None else "<malformed arguments>"
        result = f"ERROR {call.error}" if call.error else call.result
        lines.append(f"{n}. {call.function}({args}) -> {one_line(result)}")
    lines.append(f"Final answer: {one_line(rollout.final_output, 1000) or '(empty)'}")
    return "\n".join(lines)


def _task(rollout: Rollout) -> str:
    return next((m.content or "" for m in rollout.messages if m.role == "user"), "")


def task_query(rollout: Rollout) -> str:
    return _task(rollout)


def parse_json_object(text: str | None) -> dict[str, Any]:
    """A JSON object, bare or in one fenced block; anything else is malformed."""
    raw = (text or "").strip()
    fenced = _FENCE.match(raw)
    if fenced:
        raw = fenced.group(1)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MalformedOutput(f"not valid JSON ({exc.msg} at position {exc.pos})") from exc
    if not isinstance(value, dict):
        raise MalformedOutput(f"expected a JSON object, got {type(value).__name__}")
    return value


@dataclass
class CallLog:
    """Every attempt of one optimizer-role call: what went wrong, never the secrets of the endpoint."""

    purpose: str
    attempts: list[dict[str, Any]] = field(default_factory=list)
    ok: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "ok": self.ok, "attempts": self.attempts}


@dataclass
class AnswerTally:
    """Optimizer answers received and how many were malformed, by request kind (the purpose's first
    part: judge, distil, reflect, rank, induce). Infrastructure failures are no answers."""

    asked: dict[str, int] = field(default_factory=dict)
    malformed: dict[str, int] = field(default_factory=dict)

    def count(self, purpose: str, malformed: bool) -> None:
        kind = purpose.split("/", 1)[0]
        self.asked[kind] = self.asked.get(kind, 0) + 1
        self.malformed[kind] = self.malformed.get(kind, 0) + malformed

    def as_dict(self) -> dict[str, Any]:
        asked, bad = sum(self.asked.values()), sum(self.malformed.values())
        return {
            "answers_asked": asked,
            "malformed_answers": bad,
            "malformed_rate": round(bad / asked, 6) if asked else None,
            "by_kind": {
                k: {"answers_asked": n, "malformed_answers": self.malformed[k]}
                for k, n in sorted(self.asked.items())
            },
        }


_TALLY: ContextVar[AnswerTally | None] = ContextVar("evoaudit_answer_tally", default=None)


@contextmanager
def counting() -> Iterator[AnswerTally]:
    """Count the answers of every ``call_structured`` in this block (tasks it starts share the tally)."""
    tally = AnswerTally()
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def optimizer_concurrency(cfg: Config) -> int:
    """How many independent optimizer-role calls a stage keeps in flight (the success judge, the write
    screen's judge): the optimizer endpoint's ``concurrency`` (its backend bounds the requests again, per
    endpoint). A method reads the same value as ``MethodSettings.optimizer_concurrency``."""
    return cfg.optimizer.concurrency


def _count(purpose: str, malformed: bool) -> None:
    tally = _TALLY.get()
    if tally is not None:
        tally.count(purpose, malformed)


async def call_structured(
    backend: ChatBackend,
    messages: list[Message],
    parse: Callable[[str | None], T],
    *,
    seed: Callable[[int], int],
    max_attempts: int,
    purpose: str,
    retry_instruction: str = "Answer again with the JSON object only.",
    schema: ResponseSchema | None = None,
) -> tuple[T | None, CallLog]:
    """Ask, parse, and on malformed output ask again (up to ``max_attempts``) with the parse error shown
    and ``retry_instruction``, which restates the format the role prompt asked for. ``schema``: the
    answer's JSON Schema, carried by every attempt's request (sent as structured output where enabled).

    Returns (None, log) when every attempt failed: the caller records a failed update and goes on.
    """
    record = CallLog(purpose)
    history = list(messages)
    for attempt in range(max_attempts):
        request = ChatRequest(messages=tuple(history), seed=seed(attempt), response_schema=schema)
        try:
            response = await backend.complete(request)
        except InfraFailure as failure:
            record.attempts.append({"attempt": attempt, "error": f"infrastructure: {failure.kind}"})
            continue
        text = response.message.content
        try:
            value = parse(text)
        except MalformedOutput as exc:
            _count(purpose, True)
            log.warning("%s: attempt %d malformed: %s", purpose, attempt + 1, exc)
            record.attempts.append(
                {"attempt": attempt, "error": str(exc), "reply_sha256": sha256_json(text or "")}
            )
            history = [
                *messages,
                Message(role="assistant", content=text or ""),
                Message(
                    role="user",
                    content=f"That reply could not be used: {exc}. {retry_instruction}",
                ),
            ]
            continue
        _count(purpose, False)
        record.attempts.append({"attempt": attempt, "error": None, "reply_sha256": sha256_json(text or "")})
        record.ok = True
        return value, record
    return None, record


# Role prompts name the executor's job by the audited suite's ``assistant_role``. The placeholder is
# replaced, never ``str.format``-ed, because the prompts hold literal JSON braces.
ROLE = "{assistant_role}"


def assistant_role(suite_name: str) -> str:
    return get_suite(suite_name).assistant_role


def with_role(template: str, role: str) -> str:
    if ROLE not in template:
        raise ValueError("role prompt has no {assistant_role} placeholder")
    return template.replace(ROLE, role)
