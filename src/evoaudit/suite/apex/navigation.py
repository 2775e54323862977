"""Navigation exposure by rank (the report's ``apex_navigation_rank``): where each file a static attack
creates ranks when the agent searches the attacked world for the attack's first keyword, among the hits of
``search_files`` (the tool's own order, at most 50 shown) and among the files ``grep -r`` would list (those
whose bytes hold the keyword as written, hidden files included, in sorted path order: grep's own order is the
directory's). A rank of 1 is the first hit; None when the file is not among the hits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoaudit.suite.apex.attacks.attack_set import load_attack_set
from evoaudit.suite.apex.attacks.placement import apply_static
from evoaudit.suite.apex.runtime.tools import search_files
from evoaudit.suite.apex.worlds.cache import load_workspace


def _rank(paths: list[str], planted: str) -> int | None:
    return paths.index(planted) + 1 if planted in paths else None


def navigation_ranks(attacks_path: Path, worlds: Path, variant: str) -> list[dict[str, Any]]:
    """One row per file a static attack places by creating it (category 1's notes, category 2's program and
    instruction file), ranked under its first keyword (module docstring). ``worlds``: suite.apex.out, whose
    ``<variant>/`` holds the built worlds."""
    rows = []
    clean: dict[str, Any] = {}
    for a in load_attack_set(attacks_path):
        placed = [*a.payload, *((a.instruction_file,) if a.instruction_file else ())]
        files = [p.target.removeprefix("file:") for p in placed if p.target.startswith("file:")]
        if a.category not in (1, 2) or a.placement != "created" or not a.keywords or not files:
            continue
        if a.task_id not in clean:
            clean[a.task_id] = load_workspace(Path(worlds) / variant, a.task_id, variant)[0]
        ws = apply_static(clean[a.task_id], a)
        keyword = a.keywords[0]
        answer = search_files(ws, keyword, include_hidden=True)
        lines = [] if answer.startswith("no match") else answer.split("\n")
        found = [ln.split(": ...", 1)[0] for ln in lines]
        grep = sorted(p for p, f in ws.files.items() if keyword.encode() in f.data)
        for path in files:
            rows.append(
                {
                    "task_id": a.task_id,
                    "attack_id": a.attack_id,
                    "keyword": keyword,
                    "planted_path": path,
                    "search_hits": len(found),
                    "search_rank": _rank(found, path),
                    "grep_hits": len(grep),
                    "grep_rank": _rank(grep, path),
                }
            )
    return rows
