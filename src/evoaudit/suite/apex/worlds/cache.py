"""The built worlds on disk, read back: a task's world with its files laid over it, its own files and its
plans (``build.build_all`` writes them; the layout is described there). The environment half reads worlds
only through here, so replay never loads the world build's self-checks.
"""

from __future__ import annotations

import json
from pathlib import Path

from evoaudit.records import Call
from evoaudit.suite.apex.base import worldfmt
from evoaudit.suite.apex.base.workspace import Workspace

# 2: every task has a helper program its prompt names and its oracle runs; 3: the world's filler prose comes
# from a compositional grammar (prose.py), with line shapes and the stealth AUC in the manifest; 4: that prose
# also names the world's paths, helper commands and contacts, inert for a reader acting on instructions; 5:
# those sentences state things to nobody, none echoing a note's request (the exposure_clean probe).
GENERATOR_VERSION = 5


def plans_to_json(oracle: list[Call], wrong: list[Call]) -> bytes:
    doc = {
        "oracle": [c.model_dump(mode="json") for c in oracle],
        "wrong": [c.model_dump(mode="json") for c in wrong],
    }
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def load_plans(out: str | Path, task_id: str, variant: str = "v0") -> tuple[list[Call], list[Call]]:
    """(oracle plan, wrong-value plan) of a built task."""
    doc = json.loads((Path(out) / "plans" / f"{task_id}.{variant}.json").read_bytes())
    return [Call.model_validate(c) for c in doc["oracle"]], [Call.model_validate(c) for c in doc["wrong"]]


def load_workspace(
    out: str | Path, task_id: str, variant: str = "v0"
) -> tuple[Workspace, worldfmt.TaskRecord]:
    """A built world with its task's files laid over it, ready for an episode."""
    out = Path(out)
    record = worldfmt.task_from_json((out / "tasks" / f"{task_id}.{variant}.json").read_bytes())
    world = out / "worlds" / f"{record.world_id}.zip"
    ws = worldfmt.world_from_zip(world.read_bytes(), str(world))
    return worldfmt.overlay_task_files(ws, load_task_files(out, task_id, variant)), record


def load_task_files(out: str | Path, task_id: str, variant: str = "v0") -> dict[str, bytes]:
    """A built task's own files ({path: bytes}), as laid over its world (entry names checked as a world's
    are: ``worldfmt.archive_files``)."""
    path = Path(out) / "task_files" / f"{task_id}.{variant}.zip"
    with worldfmt.open_archive(path.read_bytes(), str(path)) as zf:
        return {key: zf.read(name) for name, key in worldfmt.archive_files(zf, str(path))}
