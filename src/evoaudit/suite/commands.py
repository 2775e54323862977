"""A suite's own command-line actions (``evoaudit apex tasks|build|serve|attacks|score``), as a door:
``get_commands(name)``.

The command line is above suite/ and reaches these only here, never through a concrete suite module. What
an action needs from the layers above (the attacker's model transport, the judge, the report's scoring)
the command line passes in. Only APEX-Harm has such actions; AgentDojo's suites come built with AgentDojo.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable


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

    def build_attacks(self, cfg: Any, attacker: Any, out: Path | None) -> tuple[Path, str]:
        """Build and freeze the attack set with ``attacker``: (its path, its sha256)."""
        ...

    def served_instance(self, cfg: Any, task: str, variant: str) -> tuple[Any, Any]:
        """(the suite object, the instance of ``task``) as the workflow builds them."""
        ...

    def resolve_attack_id(self, suite: Any, instance: Any, attack: str) -> None:
        """Refuse an attack id the built attack set does not hold."""
        ...


def _apex_commands() -> SuiteCommands:
    # Imported on first use: the APEX suite (and the mcp SDK) load only for its own commands.
    from evoaudit.suite.apex.commands import ApexCommands

    return ApexCommands()


COMMANDS: dict[str, Callable[[], SuiteCommands]] = {"apex": _apex_commands}


def get_commands(name: str) -> SuiteCommands:
    """The command-line actions of suite ``name`` (only suites registered here)."""
    try:
        return COMMANDS[name]()
    except KeyError:
        raise ValueError(
            f"suite {name!r} has no command-line actions in evoaudit.suite.commands; "
            f"known: {sorted(COMMANDS)}"
        ) from None
