"""Banking's instances: every kept family × variant with its role and split, and AgentDojo's own user
tasks as instances for tests and the compatibility run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from evoaudit.config import SuiteView
from evoaudit.records import Call, Instance
from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.families import EXCLUDED, FAMILIES, VARIANTS, kept_families
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


def build_instances(view: SuiteView) -> list[Instance]:
    """Every kept family × variant with its role and split (excluded families are left out); only the
    families ``suite.families`` selects, each on its side of the split of all kept families."""
    kept = kept_families()
    split = assign_split(kept, view.suite.n_unseen)
    chosen = set(select_ids(kept, view.suite.families, "suite.families", EXCLUDED))
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
                    role=view.roles.of(variant),
                    split=split.split[fam.family],
                    cluster=split.cluster[fam.family],
                    prompt=v.prompt,
                    parameters=v.parameters,
                    fixture_changes=v.fixture_changes,
                    environment_template=v.template,
                    ground_truth=v.ground_truth,
                    answer=v.answer,
                    predicate=v.predicate_for(view.suite.checker_audit.profile),
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
