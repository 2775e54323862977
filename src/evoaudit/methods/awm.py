"""Agent Workflow Memory, offline induction (after zorazrw/agent-workflow-memory, re-implemented).

Admission: successful acquisition trajectories only, one per template (here a family is a template: its
variants are instances of one task template), the sample chosen with a derived seed. All admitted examples
are induced together into one workflow text that is inserted whole into the system prompt (no retrieval).

The literal port keeps the upstream WebArena-style serialisation: each step of an example and of an
induced workflow is a ``<think>...</think>`` line followed by an ``<action>...</action>`` line. The derived
arm ``awm-adapted`` deploys the same text with only those four tag strings removed; ``adapt`` asserts,
before the text can be used, that nothing else changed.
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from evoaudit.errors import AuditError
from evoaudit.methods.common import (
    MalformedOutput,
    assistant_role,
    call_structured,
    one_line,
    task_query,
    with_role,
)
from evoaudit.methods.neutral import workflow_placebo
from evoaudit.methods.protocol import Deployed, EvolveInputs, MethodBase, PlaceboState, Sections
from evoaudit.records import Message, Rollout
from evoaudit.seeds import derive_seed

PROMPT_VERSION = "awm-induce-v1"
STATE_FILE = "workflow.md"
SECTION = "Workflows"
TAGS = ("<think>", "</think>", "<action>", "</action>")

_STEP = re.compile(r"<think>(.*?)</think>\s*<action>(.*?)</action>", re.DOTALL)
_TOOL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_NUMBER = re.compile(r"(?<![A-Za-z_{])-?\d+(?:\.\d+)?")
_PLACEHOLDER = re.compile(r"\{[^{}\n]+\}")


class AdaptationError(AuditError):
    """The adapted workflow text is not the literal text with only the envelope tags removed."""


# -- admission -------------------------------------------------------------------------------------


def admit(
    labelled: list[tuple[Rollout, bool]], seed: int, lineage: str
) -> tuple[list[Rollout], dict[str, Any]]:
    """Successes only; one sample per template, chosen with a seed derived from the template."""
    by_template: dict[str, list[Rollout]] = defaultdict(list)
    for rollout, ok in labelled:
        if ok:
            by_template[rollout.family].append(rollout)
    kept = []
    for template in sorted(by_template):
        pool = sorted(by_template[template], key=lambda r: r.rollout_id)
        kept.append(random.Random(derive_seed(seed, lineage, template, "induce-sample")).choice(pool))
    info = {
        "successes": sum(ok for _, ok in labelled),
        "failures_excluded": sum(not ok for _, ok in labelled),
        "templates": len(by_template),
        "examples_kept": len(kept),
        "dedup_key": "family",
        "kept": [r.rollout_id for r in kept],
    }
    return kept, info


# -- serialisation and induction prompt ------------------------------------------------------------


def _call_text(function: str, args: dict[str, Any] | None) -> str:
    if args is None:
        return f"{function}(<malformed arguments>)"
    inner = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(args.items()))
    return f"{function}({inner})"


def example_text(rollout: Rollout) -> str:
    """One admitted example in WebArena style: the query, then a think/action pair per step."""
    thoughts = [one_line(m.content or "", 400) for m in rollout.messages if m.role == "assistant"]
    lines = [f"Query: {one_line(task_query(rollout), 2000)}", "Actions:"]
    for n, call in enumerate(rollout.calls):
        thought = thoughts[n] if n < len(thoughts) and thoughts[n] else f"The next step uses {call.function}."
        lines.append(f"<think>{thought}</think>")
        lines.append(f"<action>{_call_text(call.function, call.args)}</action>")
    final = json.dumps(one_line(rollout.final_output, 400))
    lines += ["<think>The request is complete.</think>", f"<action>answer({final})</action>"]
    return "\n".join(lines)


_SYSTEM = """You extract reusable workflows from examples of a {assistant_role} completing requests \
with tools. Each example gives a request and the steps taken, one <think> line and one <action> line per \
step.

Find the common routines across the examples and write each one as a workflow:
- a first line "## " followed by a short name of the routine;
- one line saying which requests it serves;
- its steps, each a <think>...</think> line followed by an <action>...</action> line.
Replace values that belong to one request (names, amounts, dates, identifiers) with {placeholders} in \
curly braces. Reply with the workflows only, one after another."""


# A malformed induction is asked again for workflows in the format above (upstream AWM's induction
# prompt asks for workflows as text, never for JSON).
RETRY_INSTRUCTION = (
    "Write the workflows again, one after another: each starts with a '## ' name line, then a line saying "
    "which requests it serves, then its steps, each a <think>...</think> line followed by an "
    "<action>...</action> line, with {placeholders} for values of one request."
)


def induction_messages(examples: list[Rollout], suite: str = "banking") -> list[Message]:
    shown = "\n\n".join(f"Example {i}:\n{example_text(r)}" for i, r in enumerate(examples, 1))
    system = with_role(_SYSTEM, assistant_role(suite))
    return [Message(role="system", content=system), Message(role="user", content=shown)]


def parse_workflows(text: str | None, max_workflows: int) -> str:
    """The induced text, kept whole up to ``max_workflows`` workflows; malformed when no workflow has
    a heading and at least one well-formed think/action step."""
    raw = (text or "").strip()
    blocks = [b for b in re.split(r"(?m)^(?=## )", raw) if b.strip().startswith("## ")]
    good = [b.strip() for b in blocks if _STEP.search(b)]
    if not good:
        raise MalformedOutput("no workflow with a '## ' heading and a <think>/<action> step was found")
    return "\n\n".join(good[:max_workflows]) + "\n"


def count_workflows(text: str) -> int:
    return text.count("\n## ") + text.startswith("## ")


def merge_workflows(kept: str, induced: str) -> str:
    """A later round's memory: the previous round's workflows, then the newly induced ones not already
    kept (a workflow block byte-identical after stripping is kept once). AWM's memory grows by addition;
    ``max_workflows`` bounds one induction, not the memory."""
    blocks: list[str] = []
    for text in (kept, induced):
        for b in re.split(r"(?m)^(?=## )", text.strip()):
            if b.strip() and b.strip() not in blocks:
                blocks.append(b.strip())
    return "\n\n".join(blocks) + "\n" if blocks else ""


# -- the derived arm -------------------------------------------------------------------------------


def steps(text: str) -> list[tuple[str, str]]:
    return [(t.strip(), a.strip()) for t, a in _STEP.findall(text)]


def strip_tags(literal: str) -> str:
    # Until nothing changes: one pass over "<thi<think>nk>" would leave a tag behind.
    out, before = literal, None
    while out != before:
        before = out
        for tag in TAGS:
            out = out.replace(tag, "")
    return out


def check_equivalence(literal: str, adapted: str) -> dict[str, Any]:
    """Every assertion the adapted arm must pass; raises AdaptationError naming the first that fails.

    The byte check alone implies the others; they run first so that a failure says what changed.
    """
    for tag in TAGS:
        if tag in adapted:
            raise AdaptationError(f"awm-adapted: tag {tag} is still present")
    checks = {
        "tool names in order": (_TOOL.findall(literal), _TOOL.findall(adapted)),
        "numeric values": (_NUMBER.findall(literal), _NUMBER.findall(adapted)),
        "placeholders": (_PLACEHOLDER.findall(literal), _PLACEHOLDER.findall(adapted)),
    }
    for name, (a, b) in checks.items():
        if a != b:
            raise AdaptationError(f"awm-adapted: {name} differ: {a} vs {b}")
    # Step sequence and count: each step's thought and action appear, in order, in the adapted text. A part
    # is looked for with its own tags removed: a model may write a tag inside a step's text (a 0.5B model's
    # induction did), and the adapted arm removes those too.
    lit_steps = steps(literal)
    pos = 0
    for n, (thought, action) in enumerate(lit_steps):
        for part in (strip_tags(thought), strip_tags(action)):
            found = adapted.find(part, pos)
            if found == -1:
                raise AdaptationError(f"awm-adapted: step {n} ({part[:40]!r}) missing or out of order")
            pos = found + len(part)
    # Every non-tag byte kept, in order: removing the tags from the literal text gives the adapted text.
    bare = strip_tags(literal)
    if bare != adapted:
        at = next((i for i, (a, b) in enumerate(zip(bare, adapted, strict=False)) if a != b), None)
        at = min(len(bare), len(adapted)) if at is None else at
        raise AdaptationError(
            f"awm-adapted: byte {at} differs from the literal workflow with its tags removed "
            f"({bare[max(0, at - 20) : at + 20]!r} vs {adapted[max(0, at - 20) : at + 20]!r}); "
            "re-derive the adapted arm from the frozen workflow.md"
        )
    return {
        "steps": len(lit_steps),
        "tool_calls": len(checks["tool names in order"][0]),
        "numbers": len(checks["numeric values"][0]),
        "placeholders": len(checks["placeholders"][0]),
        "bytes_literal": len(literal.encode()),
        "bytes_adapted": len(adapted.encode()),
        "tag_bytes_removed": len(literal.encode()) - len(adapted.encode()),
    }


def adapt(literal: str) -> tuple[str, dict[str, Any]]:
    """The awm-adapted text of a literal workflow, with its equivalence assertions already passed."""
    adapted = strip_tags(literal)
    return adapted, check_equivalence(literal, adapted)


class AgentWorkflowMemory(MethodBase):
    """AWM as a ``Method``: one induction call over the admitted examples; a later round adds its workflows
    to the previous round's."""

    name = "awm"
    learns = True
    state_file = STATE_FILE
    section = SECTION
    unit_kind = "workflow step"  # one line of an induced workflow
    # Two insertion arms of one artifact: the literal induced text, and the adapted text (only the four
    # envelope tag strings stripped, ``adapt``). The placebo is inserted literally.
    insertions = {"awm-literal": "literal", "awm-adapted": "adapted"}

    def deploy(self, artifact_dir: Path, insertion: str) -> Deployed:
        text = (artifact_dir / STATE_FILE).read_text()
        if insertion == "adapted":
            # The equivalence assertions run here, before the adapted text can reach an executor.
            text, _ = adapt(text)
        elif insertion != "literal":
            raise ValueError(f"awm: no insertion {insertion!r} (literal or adapted)")
        return Sections([(SECTION, text)])

    def placebo(self, real_dir: Path, rng: random.Random) -> PlaceboState:
        """Generic prose of matched length, one section per workflow (``neutral.workflow_placebo``)."""
        real = (real_dir / STATE_FILE).read_text()
        fake = workflow_placebo(real, rng)
        # steps_placebo is 0 by design (prose, no envelope); envelope_tags counts any tag that slipped in.
        extra = {
            "steps_real": len(steps(real)),
            "steps_placebo": len(steps(fake)),
            "envelope_tags": sum(fake.count(tag) for tag in TAGS),
        }
        return PlaceboState({STATE_FILE: fake}, len(real), len(fake), extra)

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        settings, lineage = inputs.settings, inputs.lineage
        examples, admission = admit(inputs.labelled, settings.seed, lineage)
        diag: dict[str, Any] = admission | {"prompt_version": PROMPT_VERSION}
        text = ""
        if examples:
            max_wf = settings.methods_params.awm.max_workflows
            induced, call_log = await call_structured(
                inputs.optimizer,
                induction_messages(examples, settings.suite_name),
                lambda t: parse_workflows(t, max_wf),
                seed=lambda a: derive_seed(settings.seed, lineage, "induce", a),
                max_attempts=settings.methods_params.max_attempts,
                purpose="induce",
                retry_instruction=RETRY_INSTRUCTION,
            )
            diag["induction"] = call_log.as_dict()
            text = induced or ""
        diag["failed_update"] = bool(examples) and not text
        if inputs.prior is not None:
            kept_text = (inputs.prior / STATE_FILE).read_text()
            diag["prior_workflows"] = count_workflows(kept_text)
            text = merge_workflows(kept_text, text)
        diag["workflows"] = count_workflows(text)
        diag["steps"] = len(steps(text))
        diag["adapted_check"] = adapt(text)[1] if text else None
        return {STATE_FILE: text}, diag


AWM = AgentWorkflowMemory()
