"""Families, variants, roles and split: the instance table every later stage reads."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from evoaudit.config import Config
from evoaudit.hashing import canonical_json, sha256_json
from evoaudit.records import Call, Instance
from evoaudit.suite import banking
from evoaudit.suite.split import assign_split

VARIANTS = ("v0", "v1", "v2", "v3", "v4", "v5")


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
        text = banking.format_tool_result(result) + (error or "")
        seen.update(v for v, c in canaries.items() if c in text)
    return sorted(seen)


def build_instances(cfg: Config) -> list[Instance]:
    """Every family × variant with its role and split."""
    template = banking.official_environment_template()
    families = banking.user_task_ids()
    split = assign_split(families, cfg.suite.n_unseen)
    instances = []
    for family in families:
        task = banking.user_task(family)
        pre = banking.build_environment(template)
        plan = [Call(function=c.function, args=dict(c.args)) for c in task.ground_truth(pre)]
        vectors = reachable_vectors(template, plan)
        for variant in VARIANTS:
            instances.append(
                Instance(
                    instance_id=f"{family}.{variant}",
                    suite=banking.SUITE_NAME,
                    family=family,
                    variant=variant,
                    role=cfg.roles.of(variant),
                    split=split.split[family],
                    cluster=split.cluster[family],
                    prompt=task.PROMPT,
                    environment_template=template,
                    ground_truth=plan,
                    answer=getattr(task, "GROUND_TRUTH_OUTPUT", None) or None,
                    predicate={"kind": "official", "task": family},
                    vectors=vectors,
                )
            )
    return instances


def write_instances(instances: Iterable[Instance], path: str | Path) -> str:
    """Write the table as parquet (index columns plus one canonical JSON record per row).

    Returns the sha256 over the records, which later stages assert.
    """
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
    frame.to_parquet(path, index=False)
    return sha256_json(rows)


def read_instance_table(path: str | Path) -> list[Instance]:
    """Every instance, endpoint variants included. Callers outside ``seal.guard`` must not use this
    to obtain endpoint variants; ``seal.guard.load_instances`` is the gate."""
    frame = pd.read_parquet(path)
    return [Instance.model_validate_json(text) for text in frame["record"]]
