"""Bounds on the strings and arrays of a structured answer, derived from the role's ``max_tokens``.

A grammar-constrained small model may write a string until ``max_tokens`` cuts it (an unterminated, so
malformed, answer). Bounding every string (maxLength) and array (maxItems) makes the grammar close the
answer in time; the length is derived from the budget so that the worst case (every string at its bound,
every array full) fits it. Tokens are estimated: ``CHARS_PER_TOKEN`` characters of English prose per
token (BPE tokenizers average about 4; 3 leaves a margin), ``STRUCTURE_TOKENS`` per key, bracket or scalar.
"""

from __future__ import annotations

from typing import Any

CHARS_PER_TOKEN = 3
STRUCTURE_TOKENS = 3  # a key with its quotes and colon, or a bracket, a separator and whitespace
MIN_CHARS = 40  # below this a sentence does not fit: the budget is refused instead


def _tokens(schema: dict[str, Any], chars: int | None) -> int:
    """Worst-case tokens of a value of ``schema``; strings without maxLength count ``chars``."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "object" in kinds:
        props = schema.get("properties", {})
        return STRUCTURE_TOKENS + sum(STRUCTURE_TOKENS + _tokens(p, chars) for p in props.values())
    if "array" in kinds:
        if "maxItems" not in schema:
            raise ValueError("an array without maxItems has no worst case")
        return STRUCTURE_TOKENS + schema["maxItems"] * (STRUCTURE_TOKENS + _tokens(schema["items"], chars))
    if "string" in kinds:
        if "enum" in schema:
            return STRUCTURE_TOKENS + -(-max(len(e) for e in schema["enum"]) // CHARS_PER_TOKEN)
        n = schema.get("maxLength", chars)
        if n is None:
            raise ValueError("a string without maxLength has no worst case")
        return STRUCTURE_TOKENS + -(-n // CHARS_PER_TOKEN)
    return STRUCTURE_TOKENS + 6  # a boolean, null or a bounded integer


def worst_case_tokens(schema: dict[str, Any]) -> int:
    return _tokens(schema, None)


def string_chars(schema: dict[str, Any], max_tokens: int, where: str) -> int:
    """The largest maxLength for the schema's unbounded strings whose worst case fits ``max_tokens``;
    ``where`` names the config field for the error."""
    fixed, per = _tokens(schema, 0), _tokens(schema, CHARS_PER_TOKEN) - _tokens(schema, 0)
    chars = (max_tokens - fixed) // per * CHARS_PER_TOKEN if per else 0
    if chars < MIN_CHARS:
        need = fixed + per * -(-MIN_CHARS // CHARS_PER_TOKEN)
        raise ValueError(
            f"{where}: {max_tokens} tokens cannot hold this answer with strings of {MIN_CHARS} characters; "
            f"raise it to at least {need} (or lower the number of items asked for)"
        )
    return chars


def bounded(schema: dict[str, Any], chars: int) -> dict[str, Any]:
    """``schema`` with every unbounded, non-enum string given maxLength ``chars``."""
    out = dict(schema)
    kind = out.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "object" in kinds:
        out["properties"] = {k: bounded(v, chars) for k, v in out.get("properties", {}).items()}
    elif "array" in kinds:
        out["items"] = bounded(out["items"], chars)
    elif "string" in kinds and "enum" not in out and "maxLength" not in out:
        out["maxLength"] = chars
    return out


def fit(schema: dict[str, Any], max_tokens: int, where: str) -> tuple[dict[str, Any], int]:
    """``schema`` bounded to fit ``max_tokens`` and the strings' maxLength."""
    chars = string_chars(schema, max_tokens, where)
    out = bounded(schema, chars)
    assert worst_case_tokens(out) <= max_tokens
    return out, chars


def too_long(value: Any, chars: int) -> bool:
    return isinstance(value, str) and len(value) > chars
