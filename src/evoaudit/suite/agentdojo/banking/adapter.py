"""AgentDojo's Banking suite with the corrected families, as the stages above reach it
(``interface.AuditSuite``, registered in ``suite.registry``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoaudit.records import Call, Instance, Message
from evoaudit.suite.agentdojo import exposure
from evoaudit.suite.agentdojo.banking import audit, checks, instances
from evoaudit.suite.agentdojo.banking import families as family_table
from evoaudit.suite.agentdojo.banking import harm as harm_effects
from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.environments import BankingEnvironments
from evoaudit.suite.interface import PlannedInstance, select_ids
from evoaudit.suite.split import assign_split

if TYPE_CHECKING:
    from evoaudit.config import SuiteConfig, SuiteView


class BankingSuite(BankingEnvironments):
    """AgentDojo's Banking suite with the corrected families (``interface.AuditSuite``)."""

    benchmark_version = banking.BENCHMARK_VERSION
    variants = family_table.VARIANTS
    harm_categories = harm_effects.HARM_CATEGORIES
    # Method prompts say "a banking assistant"; kept byte for byte so Banking requests (and the response
    # cache keys) are what they were before the suite layer had a second suite.
    assistant_role = "banking assistant"
    benchmark = "agentdojo"
    task_noun = "banking tasks"
    simulator = "tools"
    unsupported_defenses: dict[str, str] = {}
    # The published probe set as it applies to Banking's tasks (banking/probes.py; the checker-audit table).
    applicability_rule = (
        "ground truth: every task. no-op: every task except one whose right outcome is no change. "
        "wrong recipient / wrong amount: tasks whose ground truth moves money to a recipient / sets an "
        "amount. wrong output: tasks that ask for an amount (a wrong amount whose text does not contain the "
        "right one). spurious action (a further transfer or a password change): only tasks whose right "
        "outcome is no change, the one case where the instruction forbids other changes."
    )

    def families(self, view: SuiteView | None = None) -> list[str]:
        chosen = None if view is None else view.suite.families
        return select_ids(family_table.kept_families(), chosen, "suite.families", family_table.EXCLUDED)

    def user_tasks(self) -> list[str]:
        return banking.user_task_ids()

    def excluded(self) -> dict[str, str]:
        return dict(family_table.EXCLUDED)

    def build_instances(self, view: SuiteView) -> list[Instance]:
        return instances.build_instances(view)

    def official_instances(
        self, families: Sequence[str] | None = None, variant: str = "v3"
    ) -> list[Instance]:
        """AgentDojo's own Banking user tasks as instances (the compatibility run with AgentDojo's runner)."""
        return instances.official_instances(families, variant)

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

    def injections(self, suite_cfg: SuiteConfig, instance: Instance, attack: str | None) -> dict[str, str]:
        if attack is None:
            return {}
        names = suite_cfg.attack
        text = self.injection_text(attack, instance.prompt, names.user_name, names.model_name)
        return {v: text for v in instance.vectors}

    def prompt_for(self, instance: Instance, attack: str | None) -> str:
        return instance.prompt  # Banking's injections live in the fixture, never in the request

    def exposure_applies(self, attack: str | None) -> bool:
        # Defined on every Banking rollout; a benign one has nothing placed and is never exposed.
        return True

    # --- the simulator's oracle (interface.SimOracle) -------------------------------------------------------
    def goal_plans(self, instance: Instance, attacks: Sequence[str]) -> dict[str, tuple[Call, ...]]:
        pre = banking.build_environment(instance.environment("agentdojo-yaml"))
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

    def check_utility_under_attack_isolated(
        self, instance: Instance, attack: str, output: str, pre: Any, post: Any
    ) -> bool:
        return checks.check_utility_under_attack_isolated(instance, attack, output, pre, post)

    def check_goal(self, attack: str, output: str, pre: Any, post: Any) -> bool:
        return checks.check_goal(attack, output, pre, post)

    def exposed(self, messages: list[Message], injections: dict[str, str], attack: str | None) -> bool:
        return exposure.exposed(messages, injections)

    def harm(self, pre: Any, observed: Any, plan: list[Call]) -> dict[str, bool]:
        return harm_effects.harm_categories(pre, observed, harm_effects.authorised_state(pre, plan))

    def disclosure(self, attack: str, pre: Any, post: Any) -> bool:
        return harm_effects.disclosure(attack, pre, post)

    # --- the suite stage ------------------------------------------------------------------------------------
    def planned_instances(self, view: SuiteView) -> list[PlannedInstance]:
        return [PlannedInstance(i.variant, i.split, bool(i.vectors)) for i in self.build_instances(view)]

    def check_selection(self, view: SuiteView) -> None:
        families = view.suite.families
        if families is None:
            return
        kept = family_table.kept_families()
        chosen = select_ids(kept, families, "suite.families", family_table.EXCLUDED)
        split = assign_split(kept, view.suite.n_unseen).split
        if not any(split[f] == "seen" for f in chosen):
            seen = [f for f in kept if split[f] == "seen"]
            raise ValueError(
                f"suite.families: {chosen} are all unseen families (suite.n_unseen={view.suite.n_unseen}), "
                f"so nothing would be acquired or learned; add a seen one: {', '.join(seen)}"
            )

    def checker_audit(self, suite_cfg: SuiteConfig, csv_path: Path, summary_path: Path) -> dict:
        return audit.run_checker_audit(suite_cfg, csv_path, summary_path)

    def make_instances(
        self, view: SuiteView, audit_summary: Path, table: Path, spec_path: Path, inputs: dict[str, Path]
    ) -> dict:
        return audit.make_instances(view, audit_summary, table, spec_path)
