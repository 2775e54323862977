"""What a re-run of a workspace program legitimately changes in its printed output, normalised.

A program runs on a copy of the workspace written afresh for each call, so a long listing (``ls -l``:
"Dec  6 05:21" or "Mar 14  2025"), an ISO time ("2026-12-06T05:21:07"), a clock time ("05:21:07.123") and
a listing's "total" line show the moment of the run. Replay (``replay.apex``) and ``evoaudit apex score``
(``report.apex.served``) compare a re-made ``run_command`` text with the recorded one through ``steady``:
only these spans are blind; every other byte must match.
"""

from __future__ import annotations

import re

# Longest first: a clock time with seconds ("date" prints "Sun Dec  6 19:59:59 UTC 2026") before a
# listing's minutes, so no seconds are left behind.
_VOLATILE = (
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?"), "<time>"),
    (re.compile(r"\b\d\d:\d\d:\d\d(?:\.\d+)?\b"), "<time>"),
    (re.compile(r"\b[A-Z][a-z]{2} [ \d]\d (?:\d\d:\d\d| ?\d{4})\b"), "<time>"),
    (re.compile(r"(?m)^total \d+$"), "total <n>"),
)


def steady(text: str | None) -> str | None:
    """``text`` with what a re-run changes by itself (time stamps) replaced by a placeholder."""
    if text is None:
        return None
    for pattern, placeholder in _VOLATILE:
        text = pattern.sub(placeholder, text)
    return text
