"""The judge stage's decisions in the APEX-Harm report: final outcomes and who decided them.

``apply_judged`` takes each rollout's final decisions from the judge stage's files
(``evaluate/apex/judge.py``): the task score (benign and attacked), and under attack attack success and
exposure, so task score, utility, ASR and exposure rate count what the judge decided where the rules left a
case open. ``decided_by_table`` is the APEX-Harm paper's Tables 10 and 11: per model, the share of safety
(attack success) and of exposure decisions made by rules and by the judge; a third row per model counts the
task score's rubric criteria the same way (the paper reports no such row). Cases with no exposure rate
(categories 5 and 6) are not decisions and are left out; a case still undecided (no judge file, or no
pending request recorded) is counted as such, never folded into a share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from evoaudit.records import Decisions, ReplayReport, Rollout

CHECKS: dict[Literal["attack_success", "exposure"], str] = {
    "attack_success": "safety",
    "exposure": "exposure",
}
TASK = "task_criteria"
COLUMNS = [
    "model",
    "decision",
    "n",
    "by_rule",
    "by_judge",
    "undecided",
    "share_rule",
    "share_judge",
    "not_recorded",
    "judge_file_mismatches",
]


def apply_judged(rollouts: Iterable[Rollout], judged: dict[str, Decisions]) -> list[Rollout]:
    """The rollouts with ``outcome.decisions``, the task score (and utility), ``attack_success`` and
    ``exposed`` set from the judge stage's final decisions (a rollout the judge files do not cover is
    returned unchanged)."""
    out = []
    for r in rollouts:
        final = judged.get(r.rollout_id)
        if final is None or not final.model_fields_set:
            out.append(r)
            continue
        recorded = r.outcome.decisions
        update: dict[str, Any] = {"decisions": final if recorded is None else recorded.updated(final)}
        if final.task_score is not None:
            score = final.task_score.value
            # APEX's utility (under attack too) is the whole rubric met: task score 1.
            update |= {"task_score": score, "utility": score == 1.0}
            if r.outcome.utility_under_attack is not None:
                update["utility_under_attack"] = score == 1.0
        if final.attack_success is not None:
            update["attack_success"] = final.attack_success.value is True
        if final.exposure is not None and final.exposure.decided_by != "not_applicable":
            update["exposed"] = final.exposure.value
        out.append(r.model_copy(update={"outcome": r.outcome.model_copy(update=update)}))
    return out


def decided_by_table(rollouts: Iterable[Rollout], mismatches: dict[str, tuple] | None = None) -> pd.DataFrame:
    """Per model and decision (safety / exposure over attacked rollouts; task criteria over all): how many
    were made by rule, by the judge, or are still undecided, and the rule and judge shares of the decided
    ones. ``not_recorded``: rollouts without decisions (an infrastructure failure, or a record from before
    decisions were kept)."""
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    bad: dict[tuple[str, str], int] = defaultdict(int)
    by_id = {}
    for r in rollouts:
        by_id[r.rollout_id] = r
        recorded = r.outcome.decisions
        task = recorded.task_score if recorded is not None else None
        if task is None:
            counts[(r.condition, TASK)]["not_recorded"] += 1
        for c in task.criteria if task is not None else ():
            counts[(r.condition, TASK)][c.decided_by] += 1
        if r.arm != "attacked":
            continue
        for check, label in CHECKS.items():
            d = recorded.check(check) if recorded is not None else None
            who = "not_recorded" if d is None else d.decided_by
            if who != "not_applicable":
                counts[(r.condition, label)][who] += 1
    for where in mismatches or {}:
        # Keys are "<rollout id>.<check>[.<criterion>]" (replay.apex.check_judged); ids may hold dots.
        for check, label in (*CHECKS.items(), ("task_score", TASK)):
            rid, found, _ = where.partition(f".{check}")
            if found and rid in by_id:
                bad[(by_id[rid].condition, label)] += 1
                break
    rows = []
    for (model, label), c in sorted(counts.items()):
        decided = c["rule"] + c["judge"]
        rows.append(
            {
                "model": model,
                "decision": label,
                "n": decided + c["undecided"],
                "by_rule": c["rule"],
                "by_judge": c["judge"],
                "undecided": c["undecided"],
                "share_rule": c["rule"] / decided if decided else float("nan"),
                "share_judge": c["judge"] / decided if decided else float("nan"),
                "not_recorded": c["not_recorded"],
                "judge_file_mismatches": bad[(model, label)],
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def judged_rollouts(
    shards: Iterable[str | Path], judge_files: Iterable[str | Path], policy: str, what: str
) -> list[Rollout]:
    """One run's rollouts with the judge stage's final decisions applied (checked against the rollouts
    first, without asking again) and the failure ``policy`` applied: how the ablation and the defence
    tables take each run they compare (``what`` names it in the error)."""
    from evoaudit.evaluate.apex.judge import read_judged
    from evoaudit.jsonl import read_records
    from evoaudit.replay.apex import check_judged
    from evoaudit.report.apex import scores as sc

    rollouts = [r for p in shards for r in read_records(Path(p), Rollout)]
    judged = read_judged(Path(p) for p in judge_files)
    mismatches = check_judged(rollouts, judged)
    if mismatches:
        raise ValueError(
            f"{what}: {len(mismatches)} judge decisions do not match the rollouts, e.g. "
            f"{next(iter(mismatches))}; rerun its apex_judge rule"
        )
    return sc.scored(apply_judged(rollouts, judged), policy)


def replay_totals(reports: Iterable[str | Path]) -> dict[str, int]:
    """Rollouts replayed and mismatched over replay reports (``replay.stage``'s JSON)."""
    reps = [ReplayReport.read(p) for p in reports]
    return {
        "replayed": sum(r.replayed for r in reps),
        "mismatched_rollouts": sum(r.mismatched_rollouts for r in reps),
    }
