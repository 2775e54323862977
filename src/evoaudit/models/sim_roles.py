"""The simulator's answers to evolution-role requests (optimizer, workflow inducer, memory distiller,
judge), recognised from the request's messages alone. Each method's prompt module defines the format.
"""

from __future__ import annotations

from evoaudit.records import Message


def respond(messages: list[Message], seed: int | None) -> Message | None:
    """An answer when ``messages`` are an evolution-role request, else None (an agent turn)."""
    return None
