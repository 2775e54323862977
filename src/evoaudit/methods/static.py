"""``static``: the identity artifact. The unevolved executor; every other condition is compared to it."""

from __future__ import annotations

from typing import Any

from evoaudit.config import Config
from evoaudit.methods.protocol import EvolveInputs


class Static:
    """The identity as a ``Method``: it learns nothing (``evolve`` is handed no trajectory and no
    optimizer) and deploys no state."""

    name = "static"
    learns = False

    def success_label(self, cfg: Config) -> str:
        return cfg.methods_params.success_label

    def check_budgets(self, cfg: Config) -> None:
        return None

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        return {}, {"note": "identity: deploys no state"}


STATIC = Static()
