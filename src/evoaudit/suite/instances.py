"""Families, variants, roles and split: the instance table every later stage reads."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from evoaudit import atomic
from evoaudit.config import Config
from evoaudit.errors import AuditError
from evoaudit.hashing import canonical_json, sha256_json
from evoaudit.records import Call, Instance
from evoaudit.suite import banking
from evoaudit.suite.families import EXCLUDED, FAMILIES, VARIANTS, kept_families
from evoaudit.suite.interface import select_ids
from evoaudit.suite.split import assign_split


def reachable_vectors(template: str, plan: list[Call]) -> list[str]:
    """Vectors whose text a model sees when it follows ``plan``: found by executing it with canaries.

    AgentDojo's own ``suite.check()`` cannot be used for this in 0.1.35 (tool content is now a list of
    blocks), so the plan is executed here through the real runtime.
    """
    canaries = {v: f"<CANARY---{v}--->" for v in banking.vector_defaults()}
    env = banking.build_environment(template, canaries)
    runtime = banking.make_runtime()
    seen: set[str] = set()
    for call in plan:
        result, error = runtime.run_function(env, call.function, call.args)
        text = (error or "") if error else banking.format_tool_result(result)
        seen.update(v for v, c in canaries.items() if c in text)
    return sorted(seen)


def build_instances(cfg: Config) -> list[Instance]:
    """Every kept family × variant with its role and split (excluded families are left out); only the
    families ``suite.families`` selects, each on its side of the split of all kept families."""
    kept = kept_families()
    split = assign_split(kept, cfg.suite.n_unseen)
    chosen = set(select_ids(kept, cfg.suite.families, "suite.families", EXCLUDED))
    instances = []
    for fam in FAMILIES:
        if fam.family not in chosen:
            continue
        for index, variant in enumerate(VARIANTS):
            v = fam.variant(index)
            instances.append(
                Instance(
                    instance_id=f"{fam.family}.{variant}",
                    suite=banking.SUITE_NAME,
                    family=fam.family,
                    variant=variant,
                    role=cfg.roles.of(variant),
                    split=split.split[fam.family],
                    cluster=split.cluster[fam.family],
                    prompt=v.prompt,
                    parameters=v.parameters,
                    fixture_changes=v.fixture_changes,
                    environment_template=v.template,
                    ground_truth=v.ground_truth,
                    answer=v.answer,
                    predicate=v.predicate_for(cfg.suite.checker_audit.profile),
                    vectors=reachable_vectors(v.template, v.ground_truth),
                )
            )
    # The simulator finds an instance's oracle plan by its opening prompt.
    prompts = Counter(i.prompt for i in instances)
    duplicated = [p for p, n in prompts.items() if n > 1]
    if duplicated:
        raise ValueError(
            f"suite.families: prompts shared by several variants: {duplicated}; make each unique"
        )
    return instances


# Parquet schema metadata that marks the sealed endpoint file; ``read_instance_table`` refuses such a file.
SEALED_KEY = b"evoaudit.sealed"
SEALED_VALUE = b"endpoint variants"


class SealedTableError(AuditError):
    """A sealed endpoint file was about to be read outside ``seal.guard``."""


def write_instances(instances: Iterable[Instance], path: str | Path, *, sealed: bool = False) -> str:
    """Write the table as parquet (index columns plus one canonical JSON record per row); ``sealed`` marks
    the file as the sealed endpoint file, which only ``seal.guard`` opens.

    Returns the sha256 over the records, which later stages assert.
    """
    import pandas as pd  # here, not at the top: the many jobs that only read the table never need pandas

    rows = [inst.model_dump(mode="json") for inst in instances]
    frame = pd.DataFrame(
        {
            "instance_id": [r["instance_id"] for r in rows],
            "family": [r["family"] for r in rows],
            "variant": [r["variant"] for r in rows],
            "role": [r["role"] for r in rows],
            "split": [r["split"] for r in rows],
            "record": [canonical_json(r) for r in rows],
        }
    )
    buffer = io.BytesIO()
    if sealed:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), SEALED_KEY: SEALED_VALUE})
        pq.write_table(table, buffer)
    else:
        frame.to_parquet(buffer, index=False)
    atomic.write_bytes(path, buffer.getvalue())
    return sha256_json(rows)


def _read_records(path: str | Path) -> tuple[list[Instance], bool]:
    import pyarrow.parquet as pq  # pyarrow alone: pandas would add half a second to every job's start

    table = pq.read_table(path, columns=["record"])
    sealed = (table.schema.metadata or {}).get(SEALED_KEY) == SEALED_VALUE
    records = table.column("record").to_pylist()
    return [Instance.model_validate_json(text) for text in records], sealed


def read_instance_table(path: str | Path) -> list[Instance]:
    """Every instance of an unsealed table. The sealed endpoint file is refused: it opens only through
    ``seal.guard.load_endpoint_instances`` (verified manifest, unseal event)."""
    instances, sealed = _read_records(path)
    if sealed:
        raise SealedTableError(
            f"protocol rule 'endpoint blindness': {path} is the sealed endpoint file; it is opened only "
            "through the seal (seal.guard.load_endpoint_instances: the suite spec's sha256, a verified "
            "freeze manifest and an unseal event) - e.g. `evoaudit replay --spec ... --manifest ... "
            "--event ...`"
        )
    return instances


def read_endpoint_table(path: str | Path) -> list[Instance]:
    """The sealed endpoint file's instances. Only ``seal.guard`` calls this, after its checks
    (``tests/test_seal_one_door.py`` pins that)."""
    return _read_records(path)[0]


def _canary_vectors(template: str, plan: list[Call]) -> list[str]:
    """Injection vectors whose text the plan's tool results show (a canary per vector)."""
    canaries = {v: f"canary{i}x{v}" for i, v in enumerate(sorted(banking.vector_defaults()))}
    env = banking.build_environment(template, canaries)
    runtime = banking.make_runtime()
    seen: set[str] = set()
    for call in plan:
        result, _ = runtime.run_function(env, call.function, dict(call.args))
        text = banking.format_tool_result(result)
        seen |= {v for v, token in canaries.items() if token in text}
    return sorted(seen)


def official_instances(families: Sequence[str] | None = None, variant: str = "v3") -> list[Instance]:
    """AgentDojo's own Banking user tasks as instances (official prompt, fixture and ground truth): small
    fixtures for tests and the compatibility run, outside the audit's family table."""
    template = banking.official_environment_template()
    out = []
    for family in families or banking.user_task_ids():
        task = banking.user_task(family)
        env = banking.build_environment(template)
        plan = [Call(function=c.function, args=dict(c.args)) for c in task.ground_truth(env)]
        out.append(
            Instance(
                instance_id=f"{family}.{variant}",
                suite="banking",
                family=family,
                variant=variant,
                role="endpoint",
                split="unseen",
                cluster=family,
                prompt=task.PROMPT,
                environment_template=template,
                ground_truth=plan,
                predicate={"kind": "official", "task": family},
                vectors=_canary_vectors(template, plan),
            )
        )
    return out
