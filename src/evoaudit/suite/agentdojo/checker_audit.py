"""The published checker audit of an AgentDojo suite's official utility predicates, for the suites audited
without corrected families (Workspace, Travel, Slack; Banking has its own, ``banking/audit.py``).

Every user task's official predicate (``utility_from_traces`` where the task defines one, else
``utility``, as AgentDojo's ``TaskSuite`` decides) is run on terminal states built through the suite's real
tools from its real default environment (``load_and_inject_default_environment`` with no injection, then
the task's ``init_environment``, as AgentDojo's runner does). The published probe set:

- ``ground_truth``: the task's own ground-truth calls and its ``GROUND_TRUTH_OUTPUT``; always applicable,
  must be accepted. A call that returns an error is kept going past, as AgentDojo's ground-truth pipeline
  does; the row's reason counts them.
- ``no_op``: nothing done, nothing useful said; applicable where the task asks for a change (its ground
  truth changes the environment) or an answer (it has a reference output); must be rejected.
- ``wrong_output``: the ground-truth calls with a wrong answer; applicable where the task has a reference
  output that states a value (a combined task's bare numbering "1.  2." states none). The wrong answer
  keeps the reference's shape but none of its values: every letter rotated by 13 and every digit by 5
  (every character of every name and number changes in place).
- ``spurious_action``: the ground truth plus one unrequested consequential call of the suite (its
  ``SuiteRules.spurious_calls``); applicable under the suite's rule, which each suite writes down.

A predicate passes when it accepts ground truth and rejects every applicable probe. Each decision is a row
with its reason; no model is called.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentdojo.base_tasks import BaseUserTask
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suite
from agentdojo.task_suite.task_suite import TaskSuite

from evoaudit.records import Call, CheckerAuditSummary
from evoaudit.suite.agentdojo.probing import DONE_OUTPUT, NO_OP_OUTPUT, Probe
from evoaudit.suite.stage import AUDIT_FIELDS, write_csv

if TYPE_CHECKING:
    from evoaudit.config import SuiteConfig

BENCHMARK_VERSION = "v1.2.2"
PROBE_SET = "published"
PROBES = ("ground_truth", "no_op", "wrong_output", "spurious_action")
# Failure classes in order of severity: a predicate's class is the first that applies.
DEFECT_ORDER = ("rejects_ground_truth", "accepts_no_op", "output_insensitive", "spurious_action_insensitive")
DEFECT_OF_PROBE = {
    "no_op": "accepts_no_op",
    "wrong_output": "output_insensitive",
    "spurious_action": "spurious_action_insensitive",
}
# What the spurious-action rule of a suite may be (SuiteRules.spurious_when).
SPURIOUS_RULES = ("no_change", "never")


@dataclass(frozen=True)
class SuiteRules:
    """What one suite fixes of the published probe set: which AgentDojo suite, its unrequested call, when
    that call is a probe (``spurious_when``) and the applicability rule as written for the report."""

    name: str
    # Unrequested consequential calls of the suite's own tools; the probe tries each (any accepted fails).
    spurious_calls: tuple[Call, ...]
    # "no_change": spurious action applies where the ground truth leaves the environment unchanged;
    # "never": it applies to no task of the suite.
    spurious_when: str
    applicability_rule: str


@functools.cache
def load_suite(name: str) -> TaskSuite:
    return get_suite(BENCHMARK_VERSION, name)


def user_task_ids(name: str) -> list[str]:
    return sorted(load_suite(name).user_tasks, key=lambda t: int(t.rsplit("_", 1)[1]))


def pre_environment(name: str, task: BaseUserTask) -> Any:
    """The environment an episode of ``task`` starts from when nothing is injected (AgentDojo's runner)."""
    return task.init_environment(load_suite(name).load_and_inject_default_environment({}))


def run_plan(name: str, pre: Any, plan: Sequence[Call]) -> tuple[Any, list[FunctionCall], int]:
    """``plan`` run from a copy of ``pre`` through the suite's runtime: the terminal state, the calls as a
    trace for ``utility_from_traces`` and the number of calls that returned an error."""
    post = pre.model_copy(deep=True)
    runtime = FunctionsRuntime(load_suite(name).tools)
    errors = 0
    for call in plan:
        _, error = runtime.run_function(post, call.function, call.args)
        errors += error is not None
    return post, [FunctionCall(function=c.function, args=dict(c.args)) for c in plan], errors


def official_utility(task: BaseUserTask, output: str, pre: Any, post: Any, trace: list[FunctionCall]) -> bool:
    """The task's official verdict as AgentDojo's ``TaskSuite`` computes it: the trace-based predicate
    where the task defines one, else the state predicate."""
    from_traces = task.utility_from_traces(output, pre, post, trace)
    if from_traces is not None:
        return bool(from_traces)
    return bool(task.utility(output, pre, post))


_ROTATE = str.maketrans(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "nopqrstuvwxyzabcdefghijklmNOPQRSTUVWXYZABCDEFGHIJKLM5678901234",
)


# The numbering AgentDojo's combined tasks put in their reference output ("1. 3 2."): not a value.
_ENUMERATOR = re.compile(r"(?<![\w.])\d+\.(?=\s|$)")


def reference_answer(task: BaseUserTask) -> str | None:
    """The task's reference output when it states a value (None when it is empty, or only the numbering
    of a combined task whose parts ask no question, such as Slack's "1.  2.")."""
    reference = getattr(task, "GROUND_TRUTH_OUTPUT", "") or ""
    return reference if any(ch.isalnum() for ch in _ENUMERATOR.sub("", reference)) else None


def wrong_answer(reference: str) -> str:
    """The reference's shape with none of its values: letters rotated by 13, digits by 5."""
    return reference.translate(_ROTATE)


def utility_probes(rules: SuiteRules, plan: list[Call], answer: str | None, changes: bool) -> list[Probe]:
    """The published probes of one task, each with its applicability and reason. ``answer``: the task's
    reference output (None when it has none); ``changes``: whether its ground truth changes the
    environment."""
    if rules.spurious_when not in SPURIOUS_RULES:
        raise ValueError(f"{rules.name}: spurious_when {rules.spurious_when!r}; known: {SPURIOUS_RULES}")
    output = answer if answer is not None else DONE_OUTPUT
    probes = [
        Probe(
            "ground_truth",
            True,
            "always applicable: the reference must be accepted",
            ((tuple(plan), output),),
        )
    ]
    if changes or answer is not None:
        what = " and ".join(
            w for w, on in (("a state change", changes), ("an answer", answer is not None)) if on
        )
        probes.append(Probe("no_op", True, f"applicable: the task asks for {what}", (((), NO_OP_OUTPUT),)))
    else:
        probes.append(
            Probe(
                "no_op",
                False,
                "not applicable: the ground truth changes nothing and the task has no reference output, so "
                "doing nothing cannot be told from the reference",
            )
        )
    if answer is not None:
        probes.append(
            Probe(
                "wrong_output",
                True,
                "applicable: the task has a reference output; the probe keeps its shape, none of its values",
                ((tuple(plan), wrong_answer(answer)),),
            )
        )
    else:
        probes.append(Probe("wrong_output", False, "not applicable: the task has no reference output"))
    spurious = tuple(((*plan, extra), output) for extra in rules.spurious_calls)
    if rules.spurious_when == "no_change" and not changes:
        calls = ", ".join(sorted({c.function for c in rules.spurious_calls}))
        probes.append(
            Probe(
                "spurious_action",
                True,
                f"applicable: the ground truth leaves the environment unchanged; an unrequested {calls} "
                "is the only change",
                spurious,
            )
        )
    elif rules.spurious_when == "no_change":
        probes.append(
            Probe(
                "spurious_action",
                False,
                "not applicable: the task asks for a change and its instruction does not forbid others",
            )
        )
    else:
        probes.append(
            Probe("spurious_action", False, "not applicable: the suite's rule applies it to no task")
        )
    return probes


def audit_task(rules: SuiteRules, task_id: str) -> list[dict[str, Any]]:
    """Probe rows (``suite.stage.AUDIT_FIELDS``) of one official predicate."""
    task = load_suite(rules.name).get_user_task_by_id(task_id)
    pre = pre_environment(rules.name, task)
    plan = [
        Call(function=c.function, args=dict(c.args)) for c in task.ground_truth(pre.model_copy(deep=True))
    ]
    gt_post, _, gt_errors = run_plan(rules.name, pre, plan)
    changes = gt_post.model_dump(mode="json") != pre.model_dump(mode="json")
    answer = reference_answer(task)
    rows = []
    for probe in utility_probes(rules, plan, answer, changes):
        accepted: bool | None = None
        reason = probe.reason
        if probe.applicable:
            accepted = False
            for alt_plan, output in probe.alternatives:
                post, trace, _ = run_plan(rules.name, pre, alt_plan)
                if official_utility(task, output, pre, post, trace):
                    accepted = True
                    break
        if probe.name == "ground_truth" and gt_errors:
            reason += f" ({gt_errors} of its {len(plan)} calls returned an error, as AgentDojo lets them)"
        rows.append(
            {
                "probe_set": PROBE_SET,
                "family": task_id,
                "probe": probe.name,
                "applicable": probe.applicable,
                "reason": reason,
                "accepted": accepted,
            }
        )
    return rows


def defects(rows: list[dict[str, Any]]) -> list[str]:
    """Every failure class one task's probe rows show, most severe first (empty: the predicate passes)."""
    by = {r["probe"]: r for r in rows}
    found = set()
    if not by["ground_truth"]["accepted"]:
        found.add("rejects_ground_truth")
    for probe, defect in DEFECT_OF_PROBE.items():
        if by[probe]["applicable"] and by[probe]["accepted"]:
            found.add(defect)
    return [d for d in DEFECT_ORDER if d in found]


def run_checker_audit(rules: SuiteRules, csv_path: Path, summary_path: Path) -> dict[str, Any]:
    """Probe every user task's official predicate; the rows to ``csv_path``, the summary (the same keys
    as Banking's: ``failing``, ``passing``, ``defects``) to ``summary_path``."""
    rows: list[dict[str, Any]] = []
    all_defects: dict[str, list[str]] = {}
    for task_id in user_task_ids(rules.name):
        task_rows = audit_task(rules, task_id)
        rows.extend(task_rows)
        all_defects[task_id] = defects(task_rows)
    write_csv(csv_path, AUDIT_FIELDS, rows)
    summary = CheckerAuditSummary(
        suite=rules.name,
        benchmark_version=BENCHMARK_VERSION,
        profile=PROBE_SET,
        applicability_rule=rules.applicability_rule,
        failing={t: d[0] for t, d in all_defects.items() if d},
        passing=[t for t, d in all_defects.items() if not d],
        defects=all_defects,
        excluded={},
    )
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary.write(summary_path)
    return summary.model_dump(mode="json")


class OfficialChecks:
    """A suite audited on its official predicates alone (``interface.CheckerAudit``): what the multi-suite
    checker-audit table reaches through ``registry.get_checker_audit``."""

    def __init__(self, rules: SuiteRules) -> None:
        self.rules = rules
        self.name = rules.name
        self.benchmark_version = BENCHMARK_VERSION
        self.applicability_rule = rules.applicability_rule

    def user_tasks(self) -> list[str]:
        return user_task_ids(self.name)

    def checker_audit(self, suite_cfg: SuiteConfig, csv_path: Path, summary_path: Path) -> dict:
        return run_checker_audit(self.rules, csv_path, summary_path)
