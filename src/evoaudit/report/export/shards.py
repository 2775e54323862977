"""The evaluation shards of a results directory, and their rollouts grouped per (suite, lineage,
condition, arm): what one exported log holds."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from evoaudit.hashing import sha256_file
from evoaudit.jsonl import is_aside, iter_records, read_timing
from evoaudit.paths import RELATIVE, Layout
from evoaudit.provenance import PROVENANCE_FILE
from evoaudit.records import Rollout, read_provenance


@dataclass
class Group:
    """The rollouts of one (suite, lineage, condition, arm), in id order, and the shards they came from."""

    suite: str
    lineage: str
    condition: str
    arm: str
    rollouts: list[Rollout] = field(default_factory=list)
    # {path, sha256, provenance}: each shard file read, with its entry of provenance.json where there is one.
    shards: list[dict] = field(default_factory=list)


def shard_files(results: Path, banking_suite: str = "banking") -> list[tuple[str, Path]]:
    """(suite, shard) for every finished shard: ``evaluate/<lineage>/<condition>/<arm>/shard<k>.jsonl`` of
    the configured suite and APEX-Harm's ``apex/runs/<model>/<arm>/[<category>/]shard<k>.jsonl``. Partial
    shards and moved-aside rollouts are left out."""
    found = [(banking_suite, p) for p in sorted(results.glob(RELATIVE.evaluate_shard("*", "*", "*", "*")))]
    found += [("apex", p) for p in sorted(Path(Layout.at(results).apex_runs()).rglob("shard*.jsonl"))]
    return [(s, p) for s, p in found if not is_aside(p)]


def _provenance(shard: Path) -> dict | None:
    entry = read_provenance(shard.parent / PROVENANCE_FILE).get(shard.name)
    return None if entry is None else entry.model_dump(mode="json")


def grouped(results: Path, banking_suite: str = "banking", suites: set[str] | None = None) -> list[Group]:
    """Every rollout under ``results`` grouped by (suite, lineage, condition, arm) in sorted key order,
    with its timing fields read back from the shard's timing file."""
    groups: dict[tuple[str, str, str, str], Group] = {}
    seen: dict[tuple[str, str, str, str], set[str]] = defaultdict(set)
    for suite, path in shard_files(results, banking_suite):
        if suites is not None and suite not in suites:
            continue
        entry = {"path": path.as_posix(), "sha256": sha256_file(path), "provenance": _provenance(path)}
        timing = read_timing(path)  # wall times live beside the shard
        for r in iter_records(path, Rollout):
            r = r.model_copy(update=timing.get(r.rollout_id, {}))
            key = (suite, r.lineage, r.condition, r.arm)
            g = groups.setdefault(key, Group(*key))
            if entry not in g.shards:
                g.shards.append(entry)
            if r.rollout_id not in seen[key]:
                seen[key].add(r.rollout_id)
                g.rollouts.append(r)
    for g in groups.values():
        g.rollouts.sort(key=lambda r: r.rollout_id)
    return [groups[k] for k in sorted(groups)]
