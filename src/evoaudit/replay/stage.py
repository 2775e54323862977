"""Replay entry point: recompute one evaluation shard and write a field-by-field report."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from evoaudit.errors import AuditError
from evoaudit.jsonl import read_records
from evoaudit.records import Rollout
from evoaudit.replay.recompute import field_family, replay_rollout
from evoaudit.suite.instances import read_instance_table


class ReplayMismatch(AuditError):
    pass


def replay_shard(rollouts_path: Path, table: Path, out: Path, fail_on_mismatch: bool = True) -> dict:
    instances = {i.instance_id: i for i in read_instance_table(table)}
    rollouts = read_records(rollouts_path, Rollout)
    by_field: Counter[str] = Counter()
    details = []
    for r in rollouts:
        res = replay_rollout(r, instances[r.instance_id])
        for name, (recorded, recomputed) in res.mismatches.items():
            by_field[field_family(name)] += 1
            details.append(
                {
                    "rollout_id": r.rollout_id,
                    "field": name,
                    "recorded": repr(recorded)[:300],
                    "recomputed": repr(recomputed)[:300],
                }
            )
    report = {
        "rollouts": str(rollouts_path),
        "replayed": len(rollouts),
        "mismatched_rollouts": len({d["rollout_id"] for d in details}),
        "mismatches_by_field": dict(sorted(by_field.items())),
        "details": details,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    if details and fail_on_mismatch:
        raise ReplayMismatch(
            f"replay of {rollouts_path}: {report['mismatched_rollouts']} rollout(s) differ on "
            f"{dict(by_field)}; first: {details[0]}"
        )
    return report
