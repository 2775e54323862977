"""A Banking instance per variant, built in code, for the seal tests: v3..v5 are endpoint variants."""

from __future__ import annotations

from evoaudit.records import Instance

ENDPOINT = ("v3", "v4", "v5")


def instance(variant: str) -> Instance:
    return Instance(
        instance_id=f"user_task_0.{variant}",
        suite="banking",
        family="user_task_0",
        variant=variant,
        role="endpoint" if variant in ENDPOINT else "acquisition",
        split="seen",
        cluster="c0",
        prompt=f"p {variant}",
        environment_template="{}",
        ground_truth=[],
        predicate={"kind": "none"},
    )
