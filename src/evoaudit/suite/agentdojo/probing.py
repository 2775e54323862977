"""What every AgentDojo suite's checker audit shares: a probe (a terminal state built through the suite's
real tools from its real pre-environment, with a final output) and the outputs a probe states.

Banking's probes (``banking/probes.py``) and the published probe set of the other suites
(``checker_audit.py``) are both built from these.
"""

from __future__ import annotations

from dataclasses import dataclass

from evoaudit.records import Call

# The final output of a no-op probe: nothing done and nothing useful said.
NO_OP_OUTPUT = "I was not able to complete this request."
# The final output of a probe whose task asks no question.
DONE_OUTPUT = "Done."


@dataclass(frozen=True)
class Probe:
    """One probe of one predicate: whether it applies to the task (and why), and the terminal states it
    tries, each a plan run from the pre-environment with a final output."""

    name: str
    applicable: bool
    reason: str
    alternatives: tuple[tuple[tuple[Call, ...], str], ...] = ()  # (plan, final output) pairs
