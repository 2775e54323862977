"""Reflexion-style offline memory as an evoaudit method (a plugin package; see evoaudit's docs/methods.md).

Reflexion (Shinn et al., 2023, "Reflexion: Language Agents with Verbal Reinforcement Learning") keeps, per
task, short verbal self-reflections written after a failed attempt and shows them to the agent on its next
attempt. Offline and across tasks, as evoaudit audits a method (one pass over the acquisition trajectories,
then frozen): the optimizer writes one reflection per failed acquisition trajectory, the memory keeps the
most recent ``MAX_REFLECTIONS`` of them, and the whole memory is inserted as one system-prompt section.

Fidelity choices: no per-task retry loop (the audit evaluates a frozen artifact, not an episode's second
attempt); reflections are kept across tasks, not per task, each once; a reply the optimizer leaves empty
falls back to a reflection written from the failed attempt's calls (counted in the diagnostics). The
embedded simulator has no answer of its own for this role: it replies as its agent would, and that reply is
what the memory holds (a check of the plumbing, not of the method).
"""

from __future__ import annotations

from typing import Any

from evoaudit.methods.common import call_structured, trajectory_text
from evoaudit.methods.protocol import EvolveInputs, MethodBase
from evoaudit.records import Message
from evoaudit.seeds import derive_seed

__version__ = "0.3.1"

MAX_REFLECTIONS = 8
STATE_FILE = "reflections.md"
_SYSTEM = (
    "You review an assistant's failed attempt at a request made with tools. In two sentences, say what went "
    "wrong and what the assistant should do differently next time. Answer with plain text only."
)


def _reply(text: str | None) -> str:
    return " ".join((text or "").split())[:400]


def _fallback(calls: list[str]) -> str:
    done = ", ".join(calls) if calls else "no tool"
    return f"The attempt called {done} and still failed; check each value against what was looked up first."


class Reflexion(MethodBase):
    """Verbal self-reflections on failed acquisition trajectories, inserted as one prompt section."""

    name = "reflexion"
    state_file = STATE_FILE
    section = "Reflections on earlier failures"

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        settings, lineage = inputs.settings, inputs.lineage
        failed = [r for r, ok in inputs.labelled if not ok]
        lines, from_optimizer, from_calls = [], 0, 0
        if inputs.prior is not None:
            lines = [ln for ln in (inputs.prior / STATE_FILE).read_text().splitlines() if ln.startswith("- ")]
        for n, rollout in enumerate(failed, 1):
            messages = [
                Message(role="system", content=_SYSTEM),
                Message(role="user", content=trajectory_text(rollout, False, n)),
            ]
            assert inputs.optimizer is not None
            text, _ = await call_structured(
                inputs.optimizer,
                messages,
                _reply,
                seed=lambda a, r=rollout: derive_seed(settings.seed, lineage, r.instance_id, "reflect", a),
                max_attempts=settings.methods_params.max_attempts,
                purpose=f"reflect/{rollout.instance_id}",
            )
            if text:
                from_optimizer += 1
            else:
                from_calls += 1
                text = _fallback([c.function for c in rollout.calls])
            if f"- {text}" not in lines:  # one reflection said twice is kept once
                lines.append(f"- {text}")
        kept = lines[-MAX_REFLECTIONS:]
        body = "\n".join(kept) + "\n" if kept else ""
        diagnostics = {
            "failed_trajectories": len(failed),
            "reflections": len(kept),
            "reflections_from_optimizer": from_optimizer,
            "reflections_from_calls": from_calls,
            "plugin_version": __version__,
        }
        return {STATE_FILE: body}, diagnostics
