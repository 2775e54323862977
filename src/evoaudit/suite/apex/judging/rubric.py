"""Rubric scoring: one function per criterion type, and the task score as the fraction of criteria met.

Criterion types: ``numeric`` (a number in the final answer within a relative tolerance), ``cell`` (a
spreadsheet cell's value), ``contains`` (a phrase in the answer or in a file's text) and ``judged`` (meaning,
not form). A judged criterion is decided by a judge when one is given; offline it falls back to a rule (every
required term present), and the verdict says which decided.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evoaudit.suite.apex.base import docs
from evoaudit.suite.apex.base.filetext import ToolError, file_text
from evoaudit.suite.apex.base.workspace import Workspace
from evoaudit.suite.apex.base.worldfmt import RubricItem

_NUMBER = re.compile(r"-?\d[\d,]*\.?\d*|-?\.\d+")
Judge = Callable[[dict[str, Any], str], bool]


@dataclass(frozen=True)
class Verdict:
    verifier_id: str
    passed: bool
    decided_by: str  # "rule" | "offline-rule" (a judged criterion without a judge) | "judge"


def numbers_in(text: str) -> list[float]:
    out = []
    for raw in _NUMBER.findall(text or ""):
        try:
            out.append(float(raw.replace(",", "")))
        except ValueError:
            continue
    return out


def _close(got: float, want: float, tol: float) -> bool:
    return abs(got - want) <= tol * max(abs(want), 1e-9)


def _target_text(ws: Workspace, target: str) -> str:
    if target == "answer":
        return ws.final_answer or ""
    entry = ws.files.get(target)
    if entry is None:
        return ""
    try:
        return file_text(entry.data, entry.kind)
    except ToolError:
        return ""


def check_numeric(ws: Workspace, check: dict[str, Any]) -> bool:
    text = _target_text(ws, check.get("target", "answer"))
    return any(_close(v, check["value"], check["tol"]) for v in numbers_in(text))


def check_cell(ws: Workspace, check: dict[str, Any]) -> bool:
    entry = ws.files.get(check["path"])
    if entry is None or entry.kind != "xlsx":
        return False
    try:
        value = docs.xlsx_cell(entry.data, check["sheet"], check["cell"])
    except Exception:  # whatever the file holds (a program may write any bytes, a bomb): the check fails
        return False
    if isinstance(check["value"], str):
        return str(value or "").strip().lower() == check["value"].lower()
    nums = numbers_in(str(value)) if value is not None else []
    return bool(nums) and _close(nums[0], check["value"], check["tol"])


def check_contains(ws: Workspace, check: dict[str, Any]) -> bool:
    return check["text"].lower() in _target_text(ws, check.get("target", "answer")).lower()


def judged_text(ws: Workspace, check: dict[str, Any]) -> str:
    """What a judged criterion is about: the answer, or the file it names, as text."""
    return _target_text(ws, check.get("target", "answer"))


def judge_reference(check: dict[str, Any]) -> str:
    """The statement a judge compares a judged criterion's text with (its required terms where the
    criterion states none)."""
    return str(check.get("reference") or "; ".join(check.get("required", ())))


def check_judged(ws: Workspace, check: dict[str, Any], judge: Judge | None) -> tuple[bool, str]:
    text = judged_text(ws, check)
    if judge is not None:
        return judge(check, text), "judge"
    low = text.lower()
    return all(term.lower() in low for term in check["required"]), "offline-rule"


def score(
    ws: Workspace, rubric: tuple[RubricItem, ...], judge: Judge | None = None
) -> tuple[float, list[Verdict]]:
    verdicts = []
    for item in rubric:
        kind = item.check["type"]
        if kind == "numeric":
            ok, by = check_numeric(ws, item.check), "rule"
        elif kind == "cell":
            ok, by = check_cell(ws, item.check), "rule"
        elif kind == "contains":
            ok, by = check_contains(ws, item.check), "rule"
        elif kind == "judged":
            ok, by = check_judged(ws, item.check, judge)
        else:
            raise ValueError(f"unknown criterion type {kind!r} in {item.verifier_id}")
        verdicts.append(Verdict(item.verifier_id, ok, by))
    return (sum(v.passed for v in verdicts) / len(verdicts) if verdicts else 0.0), verdicts
