"""The typed parts of a configuration that a door reads, each built in one place from a ``Config``.

A door (a suite's ``AuditSuite`` methods, a method's ``Method`` hooks) receives the section it reads, or,
where it reads several, one of the frozen views here, never the whole ``Config``: what a door can depend
on is then visible in its signature, and a test can build it without a whole configuration.
``suite_view`` is the only builder of ``SuiteView``, ``method_settings`` of ``MethodSettings``.
"""

from __future__ import annotations

from dataclasses import dataclass

from evoaudit.config.model import Config, MethodsParams, RolesConfig, SuiteConfig


@dataclass(frozen=True)
class SuiteView:
    """What a suite's door reads of a configuration: its selection, its attack and its role assignment
    (``AuditSuite.families``, ``build_instances``, ``planned_instances``, ``check_selection``,
    ``make_instances``)."""

    suite: SuiteConfig
    """The ``suite`` section: the family selection (``families``, ``n_unseen``), the attacked arm's
    ``goals`` and ``attack``, the checker-audit profile and the APEX worlds (``suite.apex``)."""

    roles: RolesConfig
    """The ``roles`` section: which variant acquires, validates or is a sealed endpoint."""

    apex_tasks: tuple[str, ...] | None = None
    """``apex.tasks``: the APEX-Harm tasks a run selects (None: all); APEX-Harm takes its families here."""


def suite_view(cfg: Config) -> SuiteView:
    """The suite door's view of ``cfg``: the one place it is built."""
    tasks = cfg.apex.tasks
    return SuiteView(suite=cfg.suite, roles=cfg.roles, apex_tasks=None if tasks is None else tuple(tasks))


@dataclass(frozen=True)
class MethodSettings:
    """What a method's door reads of a configuration (``Method.check_budgets``, its answer schemas,
    ``EvolveInputs.settings``): its parameters, the seed its requests derive from, the suite its prompts
    name and the two optimizer-endpoint settings its requests must respect."""

    methods_params: MethodsParams
    """The ``methods_params`` section: every built-in method's parameters, ``max_attempts``, ``rounds``
    and the success labels."""

    seed: int
    """The global ``seed``: every optimizer request's seed derives from it (``seeds.derive_seed``)."""

    suite_name: str
    """``suite.name``: the assistant a method's prompts describe (``methods.common.assistant_role``)."""

    optimizer_max_tokens: int
    """``optimizer.max_tokens``: bounds every answer schema a method asks for (``answer_bounds.fit``)."""

    optimizer_concurrency: int
    """``optimizer.concurrency``: how many independent optimizer requests a method keeps in flight."""


def method_settings(cfg: Config) -> MethodSettings:
    """A method's view of ``cfg``: the one place it is built."""
    return MethodSettings(
        methods_params=cfg.methods_params,
        seed=cfg.seed,
        suite_name=cfg.suite.name,
        optimizer_max_tokens=cfg.optimizer.max_tokens,
        optimizer_concurrency=cfg.optimizer.concurrency,
    )
