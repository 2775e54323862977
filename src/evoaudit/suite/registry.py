"""The suites evoaudit can audit, each an ``interface.AuditSuite``; ``get_suite`` is the door to them.

``SUITES`` maps a name to a zero-argument factory. A suite's modules are imported only when it is asked
for, so the Banking audit never loads the APEX suite (nor its optional dependencies).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evoaudit.config import ConfigError
from evoaudit.records import Call, Instance, Message
from evoaudit.suite import banking, checks, exposure, instances
from evoaudit.suite import families as family_table
from evoaudit.suite import harm as harm_effects
from evoaudit.suite.environments import BankingEnvironments
from evoaudit.suite.interface import AuditSuite, select_ids
from evoaudit.suite.split import assign_split


class BankingSuite(BankingEnvironments):
    """AgentDojo's Banking suite with the corrected families (``interface.AuditSuite``)."""

    benchmark_version = banking.BENCHMARK_VERSION
    variants = family_table.VARIANTS
    harm_categories = harm_effects.HARM_CATEGORIES
    # Method prompts say "a banking assistant"; kept byte for byte so Banking requests (and the response
    # cache keys) are what they were before the suite layer had a second suite.
    assistant_role = "banking assistant"

    def families(self, cfg: Any = None) -> list[str]:
        chosen = None if cfg is None else cfg.suite.families
        return select_ids(family_table.kept_families(), chosen, "suite.families", family_table.EXCLUDED)

    def excluded(self) -> dict[str, str]:
        return dict(family_table.EXCLUDED)

    def build_instances(self, cfg: Any) -> list[Instance]:
        return instances.build_instances(cfg)

    def injection_vectors(self) -> list[str]:
        return sorted(banking.vector_defaults())

    def goals(self) -> list[str]:
        return banking.injection_task_ids()

    # --- attacks: AgentDojo's injection goals, placed by its important_instructions attack -----------------
    def attacks(self, configured: Sequence[str], instance: Instance) -> list[str]:
        # Every goal is tried on every instance whose ground truth reaches an injection vector.
        return list(configured) if instance.vectors else []

    def injection_text(self, goal: str, prompt: str, user_name: str, model_name: str) -> str:
        return banking.injection_text(banking.make_attack(user_name, model_name), goal, prompt)

    def injections(self, cfg: Any, instance: Instance, attack: str | None) -> dict[str, str]:
        if attack is None:
            return {}
        names = cfg.suite.attack
        text = self.injection_text(attack, instance.prompt, names.user_name, names.model_name)
        return {v: text for v in instance.vectors}

    def prompt_for(self, instance: Instance, attack: str | None) -> str:
        return instance.prompt  # Banking's injections live in the fixture, never in the request

    def exposure_applies(self, attack: str | None) -> bool:
        # Defined on every Banking rollout; a benign one has nothing placed and is never exposed.
        return True

    # --- the simulator's oracle (interface.SimOracle) -------------------------------------------------------
    def goal_plans(self, instance: Instance, attacks: Sequence[str]) -> dict[str, tuple[Call, ...]]:
        pre = banking.build_environment(instance.environment_template)
        return {
            g: tuple(
                Call(function=c.function, args=dict(c.args))
                for c in banking.injection_task(g).ground_truth(pre.model_copy(deep=True))
            )
            for g in attacks
        }

    def goal_text(self, attack: str) -> str:
        return banking.injection_task(attack).GOAL

    # --- judging ------------------------------------------------------------------------------------------
    def task_score(self, instance: Instance, output: str, pre: Any, post: Any) -> float:
        # Banking's predicates are boolean: the score is 1.0 or 0.0.
        return 1.0 if checks.check_utility(instance, output, pre, post) else 0.0

    def check_utility(self, instance: Instance, output: str, pre: Any, post: Any) -> bool:
        return checks.check_utility(instance, output, pre, post)

    def check_utility_under_attack(
        self, instance: Instance, attack: str, output: str, pre: Any, post: Any
    ) -> bool:
        return checks.check_utility_under_attack(instance, attack, output, pre, post)

    def check_goal(self, attack: str, output: str, pre: Any, post: Any) -> bool:
        return checks.check_goal(attack, output, pre, post)

    def exposed(self, messages: list[Message], injections: dict[str, str], attack: str | None) -> bool:
        return exposure.exposed(messages, injections)

    def harm(self, pre: Any, observed: Any, plan: list[Call]) -> dict[str, bool]:
        return harm_effects.harm_categories(pre, observed, harm_effects.authorised_state(pre, plan))

    def disclosure(self, attack: str, pre: Any, post: Any) -> bool:
        return harm_effects.disclosure(attack, pre, post)


def _apex() -> AuditSuite:
    # Imported on first use: the APEX suite's modules (and the mcp SDK) load only when asked for.
    try:
        from evoaudit.suite.apex.adapter import ApexSuite
    except ImportError as exc:
        raise ValueError(
            f"suite.name: 'apex' is registered but its adapter could not be imported ({exc}); the APEX "
            "suite needs evoaudit.suite.apex.adapter.ApexSuite"
        ) from exc
    return ApexSuite()


SUITES: dict[str, Callable[[], AuditSuite]] = {banking.SUITE_NAME: BankingSuite, "apex": _apex}


def check_selection(cfg: Any, source: str) -> None:
    """Stop a configuration whose ``suite.families`` or ``apex.tasks`` names an id its suite does not have
    (ConfigError naming the file, the field and the valid ids), or whose Banking selection holds no seen
    family (the acquisition and the methods learn on seen families only). Called where a configuration
    enters a run (the workflow's start, the ``evoaudit`` commands); the config module itself loads no
    suite, so replay's jobs stay clear of the suites' metric code."""
    try:
        _check_selection(cfg)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _check_selection(cfg: Any) -> None:
    families, suite_name = cfg.suite.families, cfg.suite.name
    if families is not None:
        if suite_name != banking.SUITE_NAME:
            raise ValueError(
                f"suite.families: selects Banking user tasks, but suite.name is {suite_name!r}; choose the "
                "APEX tasks with apex.tasks and remove suite.families"
            )
        kept = family_table.kept_families()
        chosen = select_ids(kept, families, "suite.families", family_table.EXCLUDED)
        split = assign_split(kept, cfg.suite.n_unseen).split
        if not any(split[f] == "seen" for f in chosen):
            seen = [f for f in kept if split[f] == "seen"]
            raise ValueError(
                f"suite.families: {chosen} are all unseen families (suite.n_unseen={cfg.suite.n_unseen}), so "
                f"nothing would be acquired or learned; add a seen one: {', '.join(seen)}"
            )
    if cfg.apex.tasks is not None:
        get_suite("apex").families(cfg)  # raises naming apex.tasks and the valid ids


def get_suite(name: str) -> AuditSuite:
    try:
        factory = SUITES[name]
    except KeyError:
        raise ValueError(f"suite.name: unknown suite {name!r}; known: {sorted(SUITES)}") from None
    return factory()
