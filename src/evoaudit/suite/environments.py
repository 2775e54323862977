"""The environment half of each suite (``interface.SuiteEnvironment``): build, act on, copy and read.

Kept apart from ``registry`` so that a stage that must not lean on a suite's judging code (replay) can
reach environments and tools without importing the suite's checks, exposure or harm modules; the replay
contract in pyproject.toml checks indirect imports too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evoaudit.suite.interface import SuiteEnvironment


def _banking_environments() -> Any:
    from evoaudit.suite.agentdojo.banking.environments import BankingEnvironments

    return BankingEnvironments()


def _apex_environments() -> Any:
    # Imported on first use, like the suites in ``registry``; the module holds no judging code.
    from evoaudit.suite.apex.environment import ApexEnvironments

    return ApexEnvironments()


ENVIRONMENTS: dict[str, Callable[[], Any]] = {
    "banking": _banking_environments,
    "apex": _apex_environments,
}


def get_environment(name: str) -> SuiteEnvironment:
    """The environment half of suite ``name`` (only suites registered here; see the module docstring)."""
    try:
        return ENVIRONMENTS[name]()
    except KeyError:
        raise ValueError(
            f"suite.name: no environment registered for suite {name!r} in evoaudit.suite.environments; "
            f"known: {sorted(ENVIRONMENTS)}"
        ) from None
