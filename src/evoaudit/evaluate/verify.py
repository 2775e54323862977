"""Determinism check: rerun a sample of recorded rollouts and require byte-identical records.

The sample goes through the evaluator's own entry point, unchanged: a scratch copy of each sampled shard
holds every recorded rollout except the sampled ones as the shard's partial record, so the evaluator's
resume logic reruns exactly the sample (from the response cache or the simulator) and publishes the whole
shard. The rerun records are then compared with the recorded ones as canonical JSON after dropping timing
fields and the two fields that say where answers came from: ``executor.source`` (live endpoint or response
cache) and ``usage.requests`` (live requests only, so zero when every answer came from the cache). A rerun
from the cache changes those by design; everything the model said and the environment did must not change.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any, cast

from evoaudit.concurrency import map_ordered
from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.evaluate.stage import evaluate_shard
from evoaudit.jsonl import partial_path
from evoaudit.methods.conditions import condition
from evoaudit.paths import DEFENSE, EVALUATE, Layout
from evoaudit.provenance import write_provenance
from evoaudit.records import Arm, DeterminismReport

log = logging.getLogger(__name__)

# Wall-clock measurements, wherever they sit in a record.
TIMING_FIELDS = frozenset({"wall_s", "latency_s", "elapsed_s", "started_at", "finished_at"})
# Where the answers came from (exact paths from the record's top level).
ANSWER_SOURCE_FIELDS = (("executor", "source"), ("usage", "requests"))


class DeterminismError(AuditError):
    pass


def _drop_timing(node: Any, path: tuple[str, ...] = ()) -> Any:
    if isinstance(node, dict):
        return {
            k: _drop_timing(v, (*path, k))
            for k, v in node.items()
            if k not in TIMING_FIELDS and (*path, k) not in ANSWER_SOURCE_FIELDS
        }
    if isinstance(node, list):
        return [_drop_timing(v, path) for v in node]
    return node


def comparable(line: str) -> str:
    """A record as canonical JSON (keys sorted, fixed separators) without the ignored fields. Key order
    carries no meaning in a JSON object, and a fingerprint read back from the response cache comes with
    its keys sorted."""
    return json.dumps(
        _drop_timing(json.loads(line)), ensure_ascii=False, separators=(",", ":"), sort_keys=True
    )


def _fields(recorded: str, rerun: str | None) -> list[str]:
    """Top-level record fields that differ (timing aside); ["<missing>"] when the rerun lost the rollout."""
    if rerun is None:
        return ["<missing>"]
    a, b = _drop_timing(json.loads(recorded)), _drop_timing(json.loads(rerun))
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def _rank(seed: int, rollout_id: str) -> str:
    return hashlib.sha256(f"{seed}\x1fverify\x1f{rollout_id}".encode()).hexdigest()


def _shard_identity(path: Path, results_dir: Path) -> tuple[str | None, str, str, str, int]:
    """``<results>[/defense/<defence>]/evaluate/<lineage>/<condition>/<arm>/shard<N>.jsonl`` -> its
    defence (None: the undefended protocol) and identity."""
    parts, defense = path.relative_to(results_dir).parts, None
    if len(parts) > 2 and parts[0] == DEFENSE:
        defense, parts = parts[1], parts[2:]
    if len(parts) != 5 or parts[0] != EVALUATE or not re.fullmatch(r"shard\d+\.jsonl", parts[4]):
        raise DeterminismError(
            f"{path}: not an evaluation shard path "
            "(<results>[/defense/<defence>]/evaluate/<lineage>/<condition>/<arm>/shardN.jsonl)"
        )
    return defense, parts[1], parts[2], parts[3], int(parts[4][len("shard") : -len(".jsonl")])


def _sample_key(path: Path, results_dir: Path, rollout_id: str) -> str:
    """A rollout's name in the sample: its id, prefixed ``defense/<defence>/`` for a defended episode,
    which shares its undefended pair's id (the same episode under a defence)."""
    defense = _shard_identity(path, results_dir)[0]
    return rollout_id if defense is None else f"{DEFENSE}/{defense}/{rollout_id}"


def verify_rollouts(
    cfg: Config,
    shards: list[Path],
    *,
    table: Path,
    spec: Path,
    results_dir: Path,
    out: Path,
    sample: int | None = None,
) -> dict[str, Any]:
    """None

    Long on purpose: sampling, rerunning and comparing share the sample's bookkeeping and one scratch
    directory."""
    sample = cfg.seal.verify_sample if sample is None else sample
    # Keyed by sample key: a defended shard's rollouts are sampled beside the undefended ones.
    lines: dict[str, tuple[Path, str, str]] = {}
    for path in shards:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rid = json.loads(line)["rollout_id"]
                lines[_sample_key(path, results_dir, rid)] = (path, rid, line)
    chosen = sorted(lines, key=lambda key: _rank(cfg.seed, key))[:sample]
    by_shard: dict[Path, set[str]] = defaultdict(set)
    for key in chosen:
        by_shard[lines[key][0]].add(lines[key][1])

    differing = []
    layout = Layout.at(results_dir)
    with tempfile.TemporaryDirectory(prefix="evoaudit-verify-") as tmp:
        jobs = sorted(by_shard.items())

        def rerun_shard(job: tuple[Path, set[str]]) -> dict[str, str]:
            path, ids = job
            defense, lineage, cond, arm, index = _shard_identity(path, results_dir)
            scratch = Path(tmp) / path.relative_to(results_dir)
            scratch.parent.mkdir(parents=True, exist_ok=True)
            # The resume record: everything but the sample, so exactly the sample is rerun.
            partial_path(scratch).write_text(
                "".join(
                    line
                    for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                    if line.strip() and json.loads(line)["rollout_id"] not in ids
                ),
                encoding="utf-8",
            )
            log.info("verify: rerunning %d rollouts of %s", len(ids), path)
            evaluate_shard(
                cfg,
                lineage,
                cond,
                cast(Arm, arm),
                index,
                table=table,
                spec=spec,
                manifest_path=Path(layout.freeze("manifest.json", lineage)),
                unseal_event=Path(layout.freeze("unseal.json", lineage)),
                artifact_dir=Path(layout.artifact(lineage, condition(cond).method)),
                results_dir=results_dir,
                out=scratch,
                defense=defense,
                # llm_monitor fixes its threshold again on the lineage's acquisition record, as its shard did
                acquisition=results_dir / "acquire" / lineage / "rollouts.jsonl",
            )
            return {
                json.loads(line)["rollout_id"]: line
                for line in scratch.read_text(encoding="utf-8").splitlines()
                if line.strip()
            }

        # Shards rerun independently (each into its own scratch file, on its own event loop): against an
        # endpoint all at once, up to the executor's concurrency, compared in shard order. The in-process
        # simulator waits on nothing, so it keeps one shard at a time.
        limit = cfg.executor.concurrency if cfg.executor.backend != "sim" else 1
        reruns = map_ordered(rerun_shard, jobs, limit)
        for (path, ids), rerun in zip(jobs, reruns, strict=True):
            for rid in sorted(ids):
                recorded = lines[_sample_key(path, results_dir, rid)][2]
                if rid not in rerun or comparable(rerun[rid]) != comparable(recorded):
                    differing.append(
                        {"rollout_id": rid, "shard": str(path), "fields": _fields(recorded, rerun.get(rid))}
                    )

    record = DeterminismReport(
        sampled=len(chosen),
        verified=len(chosen) - len(differing),
        differing=len(differing),
        ignored_fields=sorted(TIMING_FIELDS) + [".".join(p) for p in ANSWER_SOURCE_FIELDS],
        rollouts=sorted(chosen),
        details=differing,
    )
    record.write(out)
    report = record.model_dump(mode="json")
    if differing:
        raise DeterminismError(
            f"determinism check: {len(differing)} of {len(chosen)} rerun rollouts differ from their records "
            f"(first: {differing[0]}); see {out}. Same config and cache must give byte-identical records"
        )
    return report


def verify_stage(
    cfg: Config,
    shards: list[Path],
    *,
    table: Path,
    spec: Path,
    results_dir: Path,
    out: Path,
    sample: int | None = None,
) -> dict[str, Any]:
    """The determinism-check job: ``verify_rollouts``, then its provenance beside the report."""
    report = verify_rollouts(
        cfg, shards, table=table, spec=spec, results_dir=results_dir, out=out, sample=sample
    )
    write_provenance(out, cfg, "verify", spec=spec, sampled=report["sampled"])
    return report
