"""A suite's own command-line actions (``evoaudit apex tasks|build|serve|attacks|score``), as a door:
``get_commands(name)``.

The command line is above suite/ and reaches these only here, never through a concrete suite module. What
an action needs from the layers above (the attacker's model transport, the judge, the report's scoring)
the command line passes in. Only APEX-Harm has such actions; AgentDojo's suites come built with AgentDojo.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from evoaudit.suite.registry import resolve

if TYPE_CHECKING:
    from evoaudit.config import Config


@runtime_checkable
class SuiteCommands(Protocol):
    def tasks(self) -> list[tuple[str, str, str]]:
        """Every task as (id, domain, difficulty), in the suite's order."""
        ...

    def build(self, suite_cfg: Any, out: str | None, tasks: list[str] | None, rebuild: bool) -> list[dict]:
        """Build the worlds of ``tasks`` (all when None) under ``out`` (default: the configured one)."""
        ...

    def serve(self, suite_cfg: Any, task: str, variant: str, *args: Any, **kwargs: Any) -> None:
        """Serve one built task's world to an outside agent (see the suite's ``serve``)."""
        ...

    def build_attacks(self, cfg: Config, attacker: Any, out: Path | None) -> tuple[Path, str]:
        """Build and freeze the attack set with ``attacker``: (its path, its sha256)."""
        ...

    def served_instance(self, cfg: Config, task: str, variant: str) -> tuple[Any, Any]:
        """(the suite object, the instance of ``task``) as the workflow builds them."""
        ...

    def resolve_attack_id(self, suite: Any, instance: Any, attack: str) -> None:
        """Refuse an attack id the built attack set does not hold."""
        ...


def get_commands(name: str) -> SuiteCommands:
    """The command-line actions of suite ``name`` (its ``commands`` entry in ``suite.registry``)."""
    return resolve("commands", name, "suite")()
