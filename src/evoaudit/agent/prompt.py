"""System prompt assembly: the base instruction plus whatever a condition's artifact inserts."""

from __future__ import annotations

from evoaudit.records import Message


def system_prompt(base: str, sections: list[tuple[str, str]] | None = None) -> str:
    """``sections`` are (heading, body) pairs appended as Markdown sections, in order."""
    parts = [base.strip()]
    for heading, body in sections or []:
        if body.strip():
            parts.append(f"## {heading}\n\n{body.strip()}")
    return "\n\n".join(parts)


def opening_messages(system: str, prompt: str) -> list[Message]:
    return [Message(role="system", content=system), Message(role="user", content=prompt)]
