"""``apex_navigation``: how often benign episodes read each file a dynamic attack's watcher monitors.

The paper's dynamic attacks rely on navigation: a watcher fires on what the agent reads. This table says,
per watched file, in how many of the benign episodes of its task the agent read it, which is how often the
watcher would fire without any attack content pulling the agent there. A read, from the rollout's calls: a
successful read tool call (``read_file``, ``read_docx``, ``read_sheet``, ``read_pdf``) of the path (relative
or ``/workspace/...``), a ``search_files`` answer showing a passage of the file (``<path>: ...``), or a
``run_command`` whose command line names the file (a rollout does not record which files a program opened,
so a read by a glob or a walk is not counted here: the share is a lower bound for commands).

``apex_navigation_rank`` (``rank_table``): where a static attack's planted files rank when the agent
navigates by the attack's first keyword, in the attacked world: among the hits of ``search_files`` (the
workspace tool's own order, at most 50 shown) and among the files ``grep -r`` would list (those whose bytes
hold the keyword as written, hidden files included, in sorted path order: grep's own order is the
directory's). A rank of 1 is the first hit; none when the planted file is not among the hits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from evoaudit.records import ExecutedCall, Rollout

READ_TOOLS = ("read_file", "read_docx", "read_sheet", "read_pdf")
COLUMNS = ["task_id", "attack_id", "monitored_path", "n_benign", "n_benign_read", "benign_read_share"]
RANK_COLUMNS = [
    "task_id",
    "attack_id",
    "keyword",
    "planted_path",
    "search_hits",
    "search_rank",
    "grep_hits",
    "grep_rank",
]


def _plain(path: str) -> str:
    text = str(path).replace("\\", "/")
    if text == "/workspace" or text.startswith("/workspace/"):
        text = text[len("/workspace") :]
    return "/".join(p for p in text.split("/") if p not in ("", "."))


def reads(call: ExecutedCall, path: str) -> bool:
    """Whether ``call`` read the workspace file ``path`` (module docstring)."""
    if call.error:
        return False
    if call.function in READ_TOOLS:
        return _plain(call.args.get("path", "")) == path
    if call.function == "search_files":
        return any(line.startswith(f"{path}: ...") for line in (call.result or "").split("\n"))
    if call.function == "run_command":
        return path.rsplit("/", 1)[-1] in str(call.args.get("command", ""))
    return False


def watched_files(attacks_path: str | Path) -> list[tuple[str, str, str]]:
    """(task id, attack id, monitored path) of every attack with a watcher in the attack set file."""
    data = json.loads(Path(attacks_path).read_text())
    return [
        (a["task_id"], a["attack_id"], _plain(a["watcher"]["monitored_path"]))
        for a in data["instances"]
        if a.get("watcher")
    ]


def navigation_table(benign: Sequence[Rollout], attacks_path: str | Path) -> pd.DataFrame:
    """One row per watched file: the benign episodes of its task and how many read it."""
    rows = []
    for task, attack_id, path in watched_files(attacks_path):
        eps = [r for r in benign if r.family == task]
        n_read = sum(any(reads(c, path) for c in r.calls) for r in eps)
        rows.append(
            {
                "task_id": task,
                "attack_id": attack_id,
                "monitored_path": path,
                "n_benign": len(eps),
                "n_benign_read": n_read,
                "benign_read_share": n_read / len(eps) if eps else None,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def empty_ranks() -> pd.DataFrame:
    """The rank table's columns and no row: a report written without the built worlds."""
    return pd.DataFrame(columns=RANK_COLUMNS).astype({"search_rank": "Int64", "grep_rank": "Int64"})


def rank_table(attacks_path: str | Path, worlds: str | Path, variant: str) -> pd.DataFrame:
    """One row per file a static attack places by creating it (category 1's notes, category 2's program and
    instruction file), ranked under its first keyword (module docstring; computed by the suite,
    ``ApexSuite.navigation_ranks``). ``worlds``: suite.apex.out, whose ``<variant>/`` holds the built
    worlds."""
    from evoaudit.suite.registry import get_suite

    rows = get_suite("apex").navigation_ranks(Path(attacks_path), Path(worlds), variant)
    return pd.DataFrame(rows, columns=RANK_COLUMNS).astype({"search_rank": "Int64", "grep_rank": "Int64"})
