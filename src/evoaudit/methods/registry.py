"""The methods by name: the one place that answers which method a name means."""

from __future__ import annotations

from evoaudit.methods.awm import AWM
from evoaudit.methods.protocol import Method
from evoaudit.methods.reasoningbank import REASONINGBANK
from evoaudit.methods.skillopt import SKILLOPT
from evoaudit.methods.static import STATIC

_METHODS: dict[str, Method] = {m.name: m for m in (STATIC, SKILLOPT, AWM, REASONINGBANK)}
METHODS = tuple(_METHODS)


def get_method(name: str) -> Method:
    try:
        return _METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known: {', '.join(METHODS)}") from None
