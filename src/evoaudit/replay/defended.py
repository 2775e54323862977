"""What replay checks of a defence beyond the tool text: which defence a shard holds, and the messages a
defence writes besides its tool results (shared by Banking's and APEX-Harm's replay).

- The shard's defence: a rollout's own ``defense`` field is a claim; the defence a shard holds is the one
  its path names (``.../defense/<d>/evaluate|runs/...``, none elsewhere), or the one its rule passes.
  ``replay.stage`` records a ``defense`` mismatch when the two differ.
- The conversation's shape under the recorded defence (``defended_messages``): the system message ends
  with what the defence appends (``Defense.system("")``); a tool filter's exchange sits at its fixed place
  (the question right after the task's user message, the answer an assistant message without calls);
  every assistant message with calls is followed by exactly one tool message per call, in order, and
  then by exactly the user messages ``Defense.after_tools`` yields for the first user prompt; only the
  last message may be an assistant message without calls.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evoaudit.paths import DEFENSE, EVALUATE
from evoaudit.suite.defenses import Defense, tool_filter_exchange

_SHARD = re.compile(rf"(?:^|/){DEFENSE}/([^/]+)/(?:{EVALUATE}|runs)/")  # evoaudit.paths.Layout's branches


def shard_defense(path: Path | str) -> str | None:
    """The defence a shard's path places it under (``results/defense/<d>/evaluate/...``,
    ``results/apex/defense/<d>/runs/...``); None for an undefended shard."""
    found = _SHARD.findall(Path(path).as_posix())
    return found[-1] if found else None


def defended_messages(messages: list[Any], defense: Defense) -> dict[str, tuple[Any, Any]]:
    """Mismatches (field -> (recorded, expected)) between ``messages`` and the shape ``defense`` gives a
    conversation (this module's docstring); empty when they agree."""
    out: dict[str, tuple[Any, Any]] = {}
    system = messages[0].content or "" if messages and messages[0].role == "system" else None
    added = defense.system("")
    if system is None or not system.endswith(added):
        out["defense.system"] = (None if system is None else system[-200:], added)
    prompt = next((m.content or "" for m in messages if m.role == "user"), "")
    after = defense.after_tools(prompt)
    start = 2
    if defense.filters_tools:
        if tool_filter_exchange(messages, set()) is None:
            out["defense.tool_filter_exchange"] = ([m.role for m in messages[:4]], "at messages[2:4]")
            return out
        start = 4
    i = start
    while i < len(messages):
        m = messages[i]
        if m.role != "assistant":
            out["defense.messages"] = (f"messages[{i}] is {m.role}", "an assistant message")
            break
        if not m.tool_calls:
            if i != len(messages) - 1:
                out["defense.messages"] = (f"messages[{i + 1}] follows the answer", "the answer last")
            break
        ids = [tc.id for tc in m.tool_calls]
        results = messages[i + 1 : i + 1 + len(ids)]
        if [(r.role, r.tool_call_id) for r in results] != [("tool", x) for x in ids]:
            out["defense.messages"] = (f"messages[{i + 1}:] after the calls of messages[{i}]", ids)
            break
        j = i + 1 + len(ids)
        added_msgs = messages[j : j + len(after)]
        if [(r.role, r.content) for r in added_msgs] != [("user", a) for a in after]:
            out["defense.messages"] = (
                f"messages[{j}:{j + len(after)}] after the tool results of messages[{i}]",
                f"the {len(after)} user message(s) {defense.name} adds",
            )
            break
        i = j + len(after)
    return out


def monitor_flags(rollout: Any, defense: Defense | None, compare: Any) -> dict[str, bool]:
    """llm_monitor: per call id, whether the recorded score reached the recorded threshold (the tool
    message must then be the detector's notice). Replay cannot ask the model again, so the scores are the
    record's; it checks that the rollout has its threshold and every executed call its score. ``compare``
    (name, recorded, expected) is told of what is missing."""
    if defense is None or not defense.monitors:
        return {}
    if defense.threshold is None:
        compare("defense.monitor_threshold", None, "the calibrated threshold")
        return {}
    out = {}
    for c in rollout.calls:
        if c.monitor_score is None:
            compare(f"monitor_score[{c.call_id}]", None, "a score")
            continue
        out[c.call_id] = defense.flagged(c.monitor_score)
    return out
