"""The files APEX-Harm's instance stage reads besides the checker audit's summary, named for the workflow,
which asks while it parses (so this module imports nothing of the suite): the worlds' spec and the frozen
attack set under ``suite.apex.out``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evoaudit.paths import Layout

if TYPE_CHECKING:
    from evoaudit.config import Config


def stage_inputs(cfg: Config) -> dict[str, str]:
    layout = Layout.of(cfg)
    return {"apex_spec": layout.apex_world("apex_spec.json"), "apex_attacks": layout.apex_attacks()}
