"""``static``: the identity artifact. The unevolved executor; every other condition is compared to it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from evoaudit.methods.protocol import Deployed, EvolveInputs, MethodBase, PlaceboState, Sections, Unit


class Static(MethodBase):
    """The identity as a ``Method``: it learns nothing (``evolve`` is handed no trajectory and no
    optimizer) and deploys no state."""

    name = "static"
    learns = False

    def deploy(self, artifact_dir: Path, insertion: str) -> Deployed:
        return Sections([])

    def placebo(self, real_dir: Path, rng: random.Random) -> PlaceboState:
        raise ValueError("static deploys no state, so it has no placebo")

    def deployed_chars(self, artifact_dir: Path) -> int:
        return 0

    def units(self, artifact_dir: Path) -> list[Unit]:
        return []

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        return {}, {"note": "identity: deploys no state"}


STATIC = Static()
