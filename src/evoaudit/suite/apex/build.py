"""Build the fifteen worlds and task records once per (task, variant) and cache them on disk.

Layout under the output directory: ``worlds/<world_id>.zip`` (APEX-Agents world format),
``tasks/<task_id>.<variant>.json`` (the task record), ``task_files/<task_id>.<variant>.zip`` (files laid over
the world), ``plans/<task_id>.<variant>.json`` (the oracle plan and its wrong-value twin, which the
APEX-Agents task format has no field for; the suite's instances carry the oracle as ground truth), and
``apex_manifest.json`` with the sha256 of each and the self-check results. An entry is reused without
regenerating only when the previous manifest has the same generator version, variant, seed and scale and its
four files still hash to what it recorded. ``sha256`` over all entries is what a suite spec pins.
``world_text`` (``world_text_checks``) holds the lines and distinct line shapes per world and across the set
and the stealth diagnostic per attack vector (no threshold, no warning); it is recomputed whenever
``sha256`` changes (building every task, cached or not, in memory).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from evoaudit import atomic
from evoaudit.hashing import sha256_file, sha256_json
from evoaudit.suite.apex.attacks import stealth
from evoaudit.suite.apex.base import docs, worldfmt
from evoaudit.suite.apex.worlds.cache import GENERATOR_VERSION, plans_to_json
from evoaudit.suite.apex.worlds.generate import TASK_IDS, GeneratedTask, build_task
from evoaudit.suite.apex.worlds.selfcheck import check_task, require


def build_all(
    out: str | Path,
    variant: str = "v0",
    seed: int = 0,
    scale: float = 1.0,
    task_ids: tuple[str, ...] = TASK_IDS,
    rebuild: bool = False,
) -> dict:
    out = Path(out)
    for sub in ("worlds", "tasks", "task_files", "plans"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    key = {"generator_version": GENERATOR_VERSION, "variant": variant, "seed": seed, "scale": scale}
    cached = {} if rebuild else _cached_entries(out, key)
    entries = []
    built: dict[str, GeneratedTask] = {}
    for tid in task_ids:
        if tid in cached:
            entries.append(cached[tid])
            continue
        task = built[tid] = build_task(tid, variant, seed, scale)
        check = check_task(task)
        require(check)
        world_zip = out / "worlds" / f"{task.record.world_id}.zip"
        task_json = out / "tasks" / f"{tid}.{variant}.json"
        files_zip = out / "task_files" / f"{tid}.{variant}.zip"
        plan_json = out / "plans" / f"{tid}.{variant}.json"
        atomic.write_bytes(world_zip, worldfmt.world_to_zip(task.world))
        atomic.write_bytes(task_json, worldfmt.task_to_json(task.record))
        atomic.write_bytes(
            files_zip,
            docs.deterministic_zip(sorted((worldfmt.FS + p, d) for p, d in task.task_files.items())),
        )
        atomic.write_bytes(plan_json, plans_to_json(task.oracle, task.wrong))
        entries.append(
            {
                "task_id": tid,
                "variant": variant,
                "world_id": task.record.world_id,
                "n_files": len(task.world.files),
                "n_mail": len(task.world.mail),
                "n_chat": len(task.world.chat),
                "n_events": len(task.world.calendar),
                "world_sha256": sha256_file(world_zip),
                "task_sha256": sha256_file(task_json),
                "task_files_sha256": sha256_file(files_zip),
                "plan_sha256": sha256_file(plan_json),
                "selfcheck": asdict(check),
            }
        )
    entries = json.loads(json.dumps(entries))  # cached and fresh entries compare equal (lists, not tuples)
    sha = sha256_json(entries)
    old_text = {} if rebuild else _cached_world_text(out, key, sha)
    if old_text:
        text = old_text
    else:
        tasks = [built.get(t) or build_task(t, variant, seed, scale) for t in task_ids]
        text = world_text_checks(tasks, seed, sha)
    manifest = {**key, "tasks": entries, "sha256": sha, "world_text": text}
    # Unchanged bytes are not rewritten: rebuilding inside a finished run leaves its time stamps alone.
    text_bytes = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    atomic.write_bytes_if_changed(out / "apex_manifest.json", text_bytes)
    return manifest


def world_text_checks(tasks: list[GeneratedTask], seed: int, worlds_sha256: str) -> dict:
    """The manifest's ``world_text``: lines and distinct line shapes per world and across the set, and the
    stealth diagnostic per vector (AUC, length-only AUC, their intervals, n; ``attacks.stealth``'s
    docstring defines them). ``worlds_sha256`` ties it to the entries it measured."""
    items = [stealth.world_items(t.world) for t in tasks]
    report = stealth.stealth_report(tasks, seed, items)
    return {
        "worlds_sha256": worlds_sha256,
        "stealth_version": stealth.STEALTH_VERSION,
        "line_shapes": stealth.shape_report(tasks, items),
        "stealth": report,
    }


def _cached_world_text(out: Path, key: dict, sha: str) -> dict:
    path = out / "apex_manifest.json"
    if not path.exists():
        return {}
    old = json.loads(path.read_text())
    text = old.get("world_text") or {}
    same = all(old.get(k) == v for k, v in key.items()) and text.get("worlds_sha256") == sha
    same = same and text.get("stealth_version") == stealth.STEALTH_VERSION
    return text if same else {}


def _cached_entries(out: Path, key: dict) -> dict[str, dict]:
    path = out / "apex_manifest.json"
    if not path.exists():
        return {}
    old = json.loads(path.read_text())
    if any(old.get(k) != v for k, v in key.items()):
        return {}
    good = {}
    for e in old.get("tasks", []):
        files = {
            out / "worlds" / f"{e['world_id']}.zip": e["world_sha256"],
            out / "tasks" / f"{e['task_id']}.{e['variant']}.json": e["task_sha256"],
            out / "task_files" / f"{e['task_id']}.{e['variant']}.zip": e["task_files_sha256"],
            out / "plans" / f"{e['task_id']}.{e['variant']}.json": e.get("plan_sha256"),
        }
        if all(f.exists() and sha256_file(f) == h for f, h in files.items()):
            good[e["task_id"]] = e
    return good
