"""A model's tool-call arguments, read as strict JSON: the one reading the agent loop, a runner profile and
replay share, so that what ran and what replay re-runs are the same call.

The arguments are text the audited model wrote, so the reading may not fail in any way but one: an
error the model is shown as the call's result (the call is not run). Python's ``json`` accepts more than
JSON does and fails in ways of its own; here:

- ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON) are refused, and so is a number literal beyond the
  float range (``1e999``, which Python reads as infinity): no record can hold such a number faithfully
  (JSON has none), so a call carrying one could be neither recorded nor replayed exactly;
- an integer literal longer than Python's integer-conversion limit (4300 digits) and nesting deeper than
  ``MAX_DEPTH`` are refused as the model's error, not raised (``ValueError``, ``RecursionError``);
- malformed text keeps the ``JSONDecodeError: ...`` text it always had.

Large finite numbers (``1e308``) are valid JSON and pass: the tools decide what to make of them, and
every check reading a state copes with them.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 64  # nesting of arrays and objects; no tool of any suite takes more than three levels
MAX_FLOAT = 1.7976931348623157e308  # the largest finite float


class ArgumentsError(ValueError):
    """Arguments the model wrote that cannot be a call: the text is what the model is shown."""


def _refuse_constant(name: str) -> Any:
    raise ArgumentsError(f"ValueError: tool arguments: {name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ArgumentsError(f"ValueError: tool arguments: the number {text[:40]} is out of range")
    return value


def _int(text: str) -> int:
    try:
        value = int(text)
    except ValueError as exc:  # beyond the integer-conversion limit
        raise ArgumentsError(f"ValueError: tool arguments: an integer of {len(text)} digits") from exc
    if abs(value) > MAX_FLOAT:
        raise ArgumentsError(f"ValueError: tool arguments: the number {text[:40]}... is out of range")
    return value


def _depth(text: str) -> int:
    """The deepest nesting of brackets outside strings (a cheap scan before the parser recurses)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_arguments(text: str) -> Any:
    """The JSON value ``text`` holds (``{}`` for blank text); ``ArgumentsError`` (a ``ValueError``) with
    the text the model is shown when it holds none (see the module docstring)."""
    if not text.strip():
        return {}
    if (
        ("[" in text or "{" in text)
        and text.count("[") + text.count("{") > MAX_DEPTH
        and (_depth(text) > MAX_DEPTH)
    ):
        raise ArgumentsError(f"ValueError: tool arguments nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_float, parse_int=_int)
    except ArgumentsError:
        raise
    except json.JSONDecodeError as exc:
        raise ArgumentsError(f"JSONDecodeError: {exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise ArgumentsError(f"ValueError: tool arguments: {type(exc).__name__}: {exc}"[:300]) from exc
