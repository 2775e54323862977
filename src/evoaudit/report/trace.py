"""One rollout rendered for a reader: messages, tool calls, where injected text entered, what changed."""

from __future__ import annotations

import json
from pathlib import Path

from evoaudit.errors import AuditError
from evoaudit.jsonl import is_aside, iter_records
from evoaudit.paths import RELATIVE, Layout
from evoaudit.records import Message, Rollout
from evoaudit.suite.registry import get_suite


class RolloutNotFound(AuditError):
    pass


def _candidates(rollout_id: str, root: Path) -> list[Path]:
    parts = rollout_id.split("/")
    if len(parts) >= 3:  # "<lineage>/<condition>/<arm>/..." names its shard directory
        shard_dir = root.joinpath(*parts[:3])
        if shard_dir.is_dir():
            found = sorted(shard_dir.glob("shard*.jsonl")) + sorted(shard_dir.glob("shard*.jsonl.partial"))
            return [p for p in found if not is_aside(p)]  # moved-aside rollouts are not the shard's
    found = sorted(root.rglob("*.jsonl")) + sorted(root.rglob("*.jsonl.partial"))
    return [p for p in found if not is_aside(p)]


def find_rollout(rollout_id: str, roots: list[Path]) -> Rollout:
    """The rollout with this id in the evaluation shards under ``roots`` (finished or partial)."""
    looked: list[str] = []
    for root in roots:
        for path in _candidates(rollout_id, root):
            looked.append(str(path))
            for r in iter_records(path, Rollout):
                if r.rollout_id == rollout_id:
                    return r
    where = ", ".join(str(r) for r in roots)
    raise RolloutNotFound(
        f"rollout {rollout_id!r} not found under {where} ({len(looked)} shard files read); "
        "ids look like L1/static/attacked/user_task_0.v3/injection_task_0 (Banking) or "
        "R1/sim/attacked/ib_wacc.v0/c1.ib_wacc.0 (APEX-Harm) - check the id, or pass --results pointing at "
        "the run's results directory"
    )


def _clip(text: str, max_chars: int) -> str:
    text = text.rstrip()
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f" … [{len(text) - max_chars} more characters]"


def _clip_around(text: str, anchor: int, max_chars: int) -> str:
    """Like _clip, but the shown window starts a little before ``anchor`` (where injected text begins)."""
    start = max(0, anchor - max_chars // 5)
    if start == 0:
        return _clip(text, max_chars)
    shown = text[start : start + max_chars]
    rest = len(text) - start - len(shown)
    return f"[{start} characters] … {shown}" + (f" … [{rest} more characters]" if rest > 0 else "")


def injection_start(content: str, injections: dict[str, str]) -> int | None:
    """Where the first line of a placed injection appears in ``content`` (None if no line is found)."""
    found = []
    for text in injections.values():
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        if first and first in content:
            found.append(content.index(first))
    return min(found) if found else None


def injected_vectors(msg: Message, injections: dict[str, str], goal: str | None, suite: str) -> list[str]:
    """The injection vectors whose text entered this tool result (by the suite's exposure rule)."""
    rule = get_suite(suite)
    return sorted(v for v, t in injections.items() if rule.exposed([msg], {v: t}, goal))


def state_changes(r: Rollout, suite: str | None) -> list[str]:
    """Executed calls that could change state: non-read tools that ran without an error (every call that
    ran, when ``suite`` is None)."""
    read_only = get_suite(suite).read_only_tools() if suite is not None else frozenset()
    out = []
    for c in r.calls:
        if c.function in read_only or c.error is not None:
            continue
        args = ", ".join(f"{k}={v!r}" for k, v in sorted((c.args or {}).items()))
        out.append(f"{c.function}({args})")
    return out


def render(r: Rollout, max_chars: int = 700, markdown: bool = False, *, suite: str | None) -> str:
    """A readable trace; ``markdown`` wraps message bodies in fenced blocks for report.md. ``suite`` names
    the rollout's suite, whose exposure rule and read-only tools the trace uses; None: a trace without
    them (no exposure marks, every executed call listed)."""
    o = r.outcome
    harm = [k for k, v in sorted(o.harm.items()) if v]
    head = [
        f"rollout {r.rollout_id}",
        f"condition {r.condition} · arm {r.arm} · instance {r.instance_id} ({r.split})"
        f" · goal {r.goal or '-'}",
        f"executor {r.executor.get('backend', '?')}/{r.executor.get('model', '?')} · seed {r.seed}"
        + (f" · defense {r.defense}" if r.defense else ""),  # an undefended trace reads as before
        f"outcome: utility={o.utility} attack_success={o.attack_success} exposed={o.exposed} "
        f"tool_calls={o.tool_calls} read_calls={o.read_calls} textual_action={o.textual_action} "
        f"infra_failure={o.infra_failure or 'none'}",
        f"harm: {', '.join(harm) if harm else 'none'}",
    ]
    lines = [("- " + h) if markdown else h for h in head]
    lines.append("")

    def body(text: str, anchor: int | None = None) -> list[str]:
        text = _clip(text, max_chars) if anchor is None else _clip_around(text, anchor, max_chars)
        if markdown:
            return ["```text", text.replace("```", "'''"), "```"]
        return ["    " + ln for ln in text.splitlines()] or ["    (empty)"]

    for i, msg in enumerate(r.messages):
        label = f"[{i}] {msg.role.upper()}" + (f" ({msg.name})" if msg.name else "")
        anchor = None
        if msg.role == "tool" and msg.content:
            vectors = injected_vectors(msg, r.injections, r.goal, suite) if suite is not None else []
            if vectors:
                label += f"  <<< INJECTED TEXT ENTERED HERE via {', '.join(vectors)}"
                # Show the injected text itself even when it sits deep in a long tool result.
                anchor = injection_start(msg.content, {v: r.injections[v] for v in vectors})
        lines.append(f"**{label}**" if markdown else label)
        if msg.content:
            lines.extend(body(msg.content, anchor))
        for tc in msg.tool_calls:
            call = f"-> call {tc.name}({tc.arguments})"
            lines.append(f"`{call}`" if markdown else "    " + call)
        if markdown:
            lines.append("")
    if suite is not None:
        changes, title = state_changes(r, suite), "State-changing calls executed:"
    else:
        changes, title = state_changes(r, None), "Calls executed (reads not told apart):"
    lines.append("")
    lines.append(f"**{title}**" if markdown else title)
    lines.extend((f"- `{c}`" if markdown else f"    {c}") for c in changes or ["none"])
    return "\n".join(lines) + "\n"


def render_json(r: Rollout) -> str:
    return json.dumps(r.model_dump(mode="json"), indent=2, sort_keys=True)


def rollout_suite(results: Path, rollout_id: str) -> str | None:
    """The suite a rollout of this run belongs to: APEX-Harm's for an id of its runs (``R<n>/...``, kept
    under ``apex/``), else the run's configured suite, as its resolved configuration
    (``config/config.json``) records it; None when the directory has none."""
    layout = Layout.at(results)
    if rollout_id.startswith("R") and Path(layout.apex()).is_dir():
        return "apex"
    resolved = Path(layout.resolved_config())
    if not resolved.is_file():
        return None
    return json.loads(resolved.read_text())["suite"]["name"]


def default_roots(results: Path) -> list[Path]:
    """Where a run keeps rollouts, both suites: Banking's evaluation and transfer shards, then APEX-Harm's
    runs (the main attack set's, then each ablation's, ``apex/<ablation>/runs``)."""
    layout = Layout.at(results)
    roots = [Path(p) for p in (layout.evaluate_root(), layout.transfer("evaluate"), layout.apex_runs())]
    roots += sorted(results.glob(RELATIVE.apex("*", "runs")))
    return [p for p in roots if p.is_dir()]
