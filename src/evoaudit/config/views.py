"""The typed parts of a configuration that a door reads, each built in one place from a ``Config``.

A door (a suite's ``AuditSuite`` methods, a method's ``Method`` hooks) receives the section it reads, or,
where it reads several, one of the frozen views here, never the whole ``Config``: what a door can depend
on is then visible in its signature, and a test can build it without a whole configuration.
``suite_view`` is the only builder of ``SuiteView``.
"""

from __future__ import annotations

from dataclasses import dataclass

from evoaudit.config.model import Config, RolesConfig, SuiteConfig


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
