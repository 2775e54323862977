"""Replay entry point: recompute one evaluation shard and write a field-by-field report."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.jsonl import read_records
from evoaudit.provenance import write_provenance
from evoaudit.records import DeterminismReport, Instance, ReplayReport, Rollout
from evoaudit.replay.defended import shard_defense
from evoaudit.replay.recompute import field_family
from evoaudit.replay.suites import replay_for
from evoaudit.seal.guard import open_endpoints
from evoaudit.suite.instances import read_instance_table

log = logging.getLogger(__name__)

OnMismatch = Literal["fail", "record"]
# The determinism check's report travels with the replay reports; it is told apart by this name.
VERIFY_REPORT_NAME = "verify.json"


class ReplayMismatch(AuditError):
    pass


class _FromPath:
    """``replay_shard``'s default defence: the one the shard's path names."""


FROM_PATH = _FromPath()


def load_instances(
    table: Path,
    *,
    spec: Path | None = None,
    manifest: Path | None = None,
    event: Path | None = None,
    results_dir: Path | None = None,
) -> dict[str, Instance]:
    """The instances of ``table`` by id; through the seal when ``spec``, ``manifest``, ``event`` are set."""
    if spec is not None and manifest is not None and event is not None:
        loaded = open_endpoints(table, spec, manifest, event, results_dir or Path("results")).instances
    else:
        loaded = read_instance_table(table)
    return {i.instance_id: i for i in loaded}


def replay_shard(
    rollouts_path: Path,
    table: Path,
    out: Path,
    on_mismatch: OnMismatch = "fail",
    *,
    spec: Path | None = None,
    manifest: Path | None = None,
    event: Path | None = None,
    results_dir: Path | None = None,
    instances: dict[str, Instance] | None = None,
    defense: str | None | _FromPath = FROM_PATH,
) -> dict[str, Any]:
    """Replay one shard. ``table`` is the endpoint file; with ``spec``, ``manifest`` and ``event`` it is
    opened through the seal (hash committed in the spec, verified manifest, unseal event). ``instances``:
    the table already opened that way (``load_instances``), for a job that replays several shards.

    ``defense``: the defence the shard holds (its rule's; None for an undefended shard), by default the
    one its path names (``replay.defended.shard_defense``). A rollout whose own ``defense`` field says
    otherwise is a ``defense`` mismatch: replay re-applies the rollout's defence, so without this check a
    defended rollout put into an undefended shard would replay cleanly and count as undefended."""
    expected = shard_defense(rollouts_path) if isinstance(defense, _FromPath) else defense
    if instances is None:
        instances = load_instances(table, spec=spec, manifest=manifest, event=event, results_dir=results_dir)
    rollouts = read_records(rollouts_path, Rollout)
    by_field: Counter[str] = Counter()
    details = []
    nondeterministic = []
    for r in rollouts:
        if r.instance_id not in instances:
            raise ReplayMismatch(
                f"{rollouts_path}: rollout {r.rollout_id} names instance {r.instance_id}, which is not in "
                f"{table}; the record and the instance table come from different suite builds"
            )
        instance = instances[r.instance_id]
        res = replay_for(instance.suite)(r, instance)
        mismatches = dict(res.mismatches)
        nondeterministic += _nondeterministic(r, res)
        if r.defense != expected:
            mismatches["defense"] = (r.defense, expected)
        for name, (recorded, recomputed) in mismatches.items():
            by_field[field_family(name)] += 1
            details.append(
                {
                    "rollout_id": r.rollout_id,
                    "field": name,
                    "recorded": repr(recorded)[:300],
                    "recomputed": repr(recomputed)[:300],
                }
            )
    record = ReplayReport(
        rollouts=str(rollouts_path),
        replayed=len(rollouts),
        mismatched_rollouts=len({d["rollout_id"] for d in details}),
        mismatches_by_field=dict(sorted(by_field.items())),
        on_mismatch=on_mismatch,
        details=details,
        **({"nondeterministic_calls": nondeterministic} if nondeterministic else {}),
    )
    record.write(out)
    if nondeterministic:
        log.info(
            "replay took the recorded file effects or text of %d nondeterministic call(s)",
            len(nondeterministic),
        )
    report = record.model_dump(mode="json")
    for d in details:
        # The log keeps the evidence even when Snakemake removes the failed job's report.
        log.error("replay mismatch %s %s: recorded %s, recomputed %s", *d.values())
    if details and on_mismatch == "fail":
        raise ReplayMismatch(
            f"replay of {rollouts_path}: {report['mismatched_rollouts']} rollout(s) differ on "
            f"{dict(by_field)}; first: {details[0]} (seal.replay_on_mismatch: record only reports this)"
        )
    return report


def _nondeterministic(rollout: Rollout, res: Any) -> list[dict[str, Any]]:
    """The calls of ``rollout`` where replay took the record's word, in call order: only APEX-Harm's replay
    has them (``replay.apex``: recorded file effects written over a re-run's, a recorded text taken for a
    program that prints another each run). ``output`` is left out for a call whose text was checked."""
    files: dict[str, list[str]] = getattr(res, "nondeterministic_calls", {})
    output = set(getattr(res, "nondeterministic_output", ()))
    order = [tc.id for m in rollout.messages if m.role == "assistant" for tc in m.tool_calls]
    listed = sorted(set(files) | output, key=lambda c: (order.index(c) if c in order else len(order), c))
    return [
        {"rollout_id": rollout.rollout_id, "call_id": c, "paths": files.get(c, [])}
        | ({"output": True} if c in output else {})
        for c in listed
    ]


def replay_stage(
    cfg: Config,
    rollouts_path: Path,
    table: Path,
    out: Path,
    on_mismatch: OnMismatch = "fail",
    **seal: Any,
) -> dict[str, Any]:
    """The replay job: provenance, then ``replay_shard`` (``seal``: spec, manifest, event, results_dir, or
    the already opened ``instances``; ``defense``: the shard's defence, else the one its path names)."""
    write_provenance(out, cfg, "replay", on_mismatch=on_mismatch)
    report = replay_shard(rollouts_path, table, out, on_mismatch, **seal)
    log.info("replayed %d rollouts, %d mismatched", report["replayed"], report["mismatched_rollouts"])
    return report


def replay_shards(
    cfg: Config,
    shards: list[tuple[Path, Path]],
    table: Path,
    on_mismatch: OnMismatch = "fail",
    defenses: list[str | None] | None = None,
    **seal: Path | None,
) -> list[dict[str, Any]]:
    """Replay several shards in one job, each (rollouts, report) pair as ``replay_stage`` would. Every shard
    is replayed and its report written before a mismatch fails the job, so one failure names them all.
    The table is opened (and its seal checked) once for all of them. ``defenses``: each shard's defence,
    in order (the rule's); without it, the one each shard's path names."""
    if defenses is not None and len(defenses) != len(shards):
        raise ValueError(f"{len(defenses)} defences for {len(shards)} shards")
    instances = load_instances(table, **seal)
    reports, failed = [], []
    for k, (rollouts_path, out) in enumerate(shards):
        which: dict[str, Any] = {} if defenses is None else {"defense": defenses[k]}
        try:
            reports.append(
                replay_stage(cfg, rollouts_path, table, out, on_mismatch, instances=instances, **which)
            )
        except ReplayMismatch as exc:
            failed.append(str(exc))
    if failed:
        summary = f"{len(failed)} of {len(shards)} shard(s) did not replay cleanly:"
        raise ReplayMismatch("\n".join([summary, *failed]))
    return reports


def audit_checks(paths: list[Path]) -> tuple[list[Path], dict[str, Any]]:
    """Split the report's re-execution inputs into per-shard replay reports and totals for the report:
    rollouts replayed, mismatches by field, and the determinism check's verified count."""
    shards = [p for p in paths if p.name != VERIFY_REPORT_NAME]
    by_field: Counter[str] = Counter()
    replayed = mismatched = 0
    for p in shards:
        r = ReplayReport.read(p)
        replayed += r.replayed
        mismatched += r.mismatched_rollouts
        by_field.update(r.mismatches_by_field)
    checks: dict[str, Any] = {
        "replay": {
            "shards": len(shards),
            "rollouts_replayed": replayed,
            "mismatched_rollouts": mismatched,
            "mismatches_by_field": dict(sorted(by_field.items())),
        },
        "verify": None,
    }
    for p in paths:
        if p.name == VERIFY_REPORT_NAME:
            v = DeterminismReport.read(p)
            checks["verify"] = {"sampled": v.sampled, "verified": v.verified, "differing": v.differing}
    return shards, checks
