"""The no-model interlock: while ``EVOAUDIT_NO_MODEL_CALLS`` is set, no backend starts, the simulator
included, so a run that must be derived from records alone (``evoaudit reproduce``) cannot quietly ask a
model instead."""

from __future__ import annotations

import os

from evoaudit.errors import AuditError

NO_MODEL_CALLS_ENV = "EVOAUDIT_NO_MODEL_CALLS"


class ModelCallRefused(AuditError):
    pass


def refuse_if_offline(role: str) -> None:
    if os.environ.get(NO_MODEL_CALLS_ENV):
        raise ModelCallRefused(
            f"{role}: no model may be called here ({NO_MODEL_CALLS_ENV} is set, as `evoaudit reproduce` "
            "sets it while it rebuilds what the records determine); a job that needs a model is not part "
            "of a reproduction"
        )


def offline() -> bool:
    return bool(os.environ.get(NO_MODEL_CALLS_ENV))
