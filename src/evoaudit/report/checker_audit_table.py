"""The multi-suite checker-audit table (``extra_suites.checker_audit``): one row per user task of every
listed suite, the official predicate's verdict under the published probe set, each probe's outcome or why
it does not apply, and the suite's applicability rule; and a per-suite summary beside it.

It reads what each suite's checker audit wrote (the probe rows of ``suite.stage.AUDIT_FIELDS`` and the
summary's ``defects``) and asks the registry only for the suite's applicability rule and its user tasks,
so a suite's verdicts are computed once, by its own audit. No model is called.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from evoaudit import atomic
from evoaudit.records import CheckerAuditSummary
from evoaudit.suite.registry import get_checker_audit

TABLE_SCHEMA_VERSION = 1
PUBLISHED = "published"
# Every probe of a published set, in the table's column order (a suite without one says "not in set").
PROBE_COLUMNS = (
    "ground_truth",
    "no_op",
    "wrong_recipient",
    "wrong_amount",
    "wrong_output",
    "spurious_action",
)
Outcome = Literal["accepted", "rejected", "not applicable", "not in set"]


class CheckerAuditRow(BaseModel):
    """One user task's official predicate under its suite's published probe set."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: int = TABLE_SCHEMA_VERSION
    """Version of this row layout; a reader refuses a version it does not know."""
    suite: str
    """The AgentDojo suite (v1.2.2)."""
    task: str
    """The user task whose official utility predicate is probed."""
    verdict: Literal["pass", "fail"]
    """pass: ground truth accepted and every applicable probe rejected."""
    defects: str
    """The failure classes the probes show, most severe first, ';'-separated (empty when it passes)."""
    applicable: str
    """The probes that apply to this task under the suite's rule, ';'-separated."""
    ground_truth: Outcome
    """The task's ground-truth calls and reference output (must be accepted)."""
    no_op: Outcome
    """Nothing done, nothing useful said (must be rejected where it applies)."""
    wrong_recipient: Outcome
    """Ground truth with one recipient replaced (Banking's set only)."""
    wrong_amount: Outcome
    """Ground truth with one amount off by ten per cent (Banking's set only)."""
    wrong_output: Outcome
    """Ground truth with a wrong answer."""
    spurious_action: Outcome
    """Ground truth plus one unrequested consequential call."""


def _outcome(row: dict[str, str] | None) -> Outcome:
    if row is None:
        return "not in set"
    if row["applicable"] != "True":
        return "not applicable"
    return "accepted" if row["accepted"] == "True" else "rejected"


def suite_rows(suite: str, csv_path: Path, summary_path: Path) -> list[CheckerAuditRow]:
    """The table's rows of one suite from its checker audit's files."""
    summary = CheckerAuditSummary.read(summary_path)
    if summary.profile not in (PUBLISHED, "strict"):
        raise ValueError(f"{summary_path}: unknown checker-audit profile {summary.profile!r}")
    with open(csv_path, newline="") as fh:
        probe_rows = [r for r in csv.DictReader(fh) if r["probe_set"] == PUBLISHED]
    expected = get_checker_audit(suite).user_tasks()
    found = list(dict.fromkeys(r["family"] for r in probe_rows))
    if found != expected:
        raise ValueError(
            f"{csv_path}: the published probe rows cover {len(found)} tasks, the {suite} suite has "
            f"{len(expected)}; rerun its checker audit"
        )
    out = []
    for task in expected:
        by = {r["probe"]: r for r in probe_rows if r["family"] == task}
        defects = summary.defects[task]
        outcomes = {p: _outcome(by.get(p)) for p in PROBE_COLUMNS}
        out.append(
            CheckerAuditRow(
                suite=suite,
                task=task,
                verdict="fail" if defects else "pass",
                defects=";".join(defects),
                applicable=";".join(p for p in PROBE_COLUMNS if outcomes[p] in ("accepted", "rejected")),
                **outcomes,
            )
        )
    return out


def summary_rows(rows: list[CheckerAuditRow]) -> list[dict[str, object]]:
    """Per suite: tasks, passing and failing predicates, and per probe 'failed/applicable' (a failure is
    ground truth rejected, any other probe accepted)."""
    out = []
    for suite in dict.fromkeys(r.suite for r in rows):
        mine = [r for r in rows if r.suite == suite]
        entry: dict[str, object] = {
            "suite": suite,
            "user_tasks": len(mine),
            "passing": sum(r.verdict == "pass" for r in mine),
            "failing": sum(r.verdict == "fail" for r in mine),
        }
        for probe in PROBE_COLUMNS:
            outcomes = [getattr(r, probe) for r in mine]
            applied = [o for o in outcomes if o in ("accepted", "rejected")]
            bad = "rejected" if probe == "ground_truth" else "accepted"
            entry[probe] = f"{sum(o == bad for o in applied)}/{len(applied)}" if applied else "n/a"
        out.append(entry)
    return out


def build_table(
    audits: dict[str, tuple[Path, Path]], table_csv: Path, table_md: Path
) -> list[CheckerAuditRow]:
    """The table over ``audits`` ({suite: (probe csv, summary)}, in the config's order) to ``table_csv``,
    with the per-suite summary and each suite's applicability rule in ``table_md``."""
    rows = [r for suite, (c, s) in audits.items() for r in suite_rows(suite, c, s)]
    fields = list(CheckerAuditRow.model_fields)
    table_csv.parent.mkdir(parents=True, exist_ok=True)
    with open(table_csv.with_suffix(".csv.partial"), "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(r.model_dump() for r in rows)
    table_csv.with_suffix(".csv.partial").replace(table_csv)
    summary = summary_rows(rows)
    head = ["suite", "user_tasks", "passing", "failing", *PROBE_COLUMNS]
    lines = [
        f"# Checker audit of the official utility predicates ({len(rows)} user tasks)",
        "",
        "Published probe set; per probe: predicates that fail it / tasks it applies to (a failure: ground",
        "truth rejected, any other probe accepted). No model is called.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(str(s[h]) for h in head) + " |" for s in summary),
        "",
        "## Applicability rule per suite",
        "",
        *(f"- **{suite}**: {get_checker_audit(suite).applicability_rule}" for suite in audits),
        "",
        "## Failing predicates",
        "",
        *(f"- {r.suite} {r.task}: {r.defects}" for r in rows if r.verdict == "fail"),
        "",
    ]
    atomic.write_text(table_md, "\n".join(lines))
    return rows
