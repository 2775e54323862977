"""SLURM end states that Snakemake's SLURM executor plugin would otherwise wait on forever.

The plugin (snakemake-executor-plugin-slurm, behaviour read in version 2.8.0) polls
``sacct -X --parsable2 --format=JobIdRaw,State`` and compares each state string *exactly* against its
list of failures (BOOT_FAIL, CANCELLED, DEADLINE, FAILED, NODE_FAIL, OUT_OF_MEMORY, TIMEOUT, ERROR). Two
end states never match, so the job is taken to be still running and the run hangs:

* ``CANCELLED by <uid>``: what ``sacct`` prints for every ``scancel`` (by a user or an administrator);
* ``PREEMPTED``: the plugin logs a warning and keeps waiting for SLURM to requeue the job, which never
  happens when the job was submitted without requeue (the profile sets ``slurm-no-requeue``).

:func:`install` wraps the plugin's status query so that these states reach it as ``CANCELLED`` (a
failure it knows), and logs the state SLURM gave, with the job id, so that Snakemake's ``retries`` and
``--keep-going`` apply. The Snakefile calls it; nothing else changes. The wrapper only rewrites states the
plugin does not handle, so it is harmless once upstream handles them; ``tests/ops/test_ops_slurm_states.py``
reads the installed plugin and fails when its matching changes, which is the cue to drop this module.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

PLUGIN = "snakemake_executor_plugin_slurm"
#: The plugin version whose state matching this module was written against.
PLUGIN_VERSION_SEEN = "2.8.0"
#: States the plugin (2.8.0) reports as job failures; it compares with ``in`` on this tuple.
PLUGIN_FAILURE_STATES = (
    "BOOT_FAIL",
    "CANCELLED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "TIMEOUT",
    "ERROR",
)
#: SLURM end states in which the job's outputs were not produced: each must end the job as a failure.
FAILURE_STATES = frozenset(PLUGIN_FAILURE_STATES) | {"PREEMPTED"}
#: Marks a status query function already wrapped here (so installing twice wraps once).
_WRAPPED = "_evoaudit_slurm_states"


def base_state(raw: str) -> str:
    """The SLURM state name alone: ``"CANCELLED by 1000"`` -> ``"CANCELLED"``.

    ``sacct`` appends the cancelling uid to CANCELLED, and fixed-width output marks a cut state with ``+``.
    """
    words = raw.strip().split()
    return words[0].rstrip("+") if words else ""


def for_plugin(raw: str, *, requeue: bool = False) -> str:
    """The state to hand to the plugin so that it acts on it as SLURM meant.

    A state the plugin already matches, or one that is not an end state, passes unchanged. With the
    plugin's ``requeue`` setting on, SLURM itself requeues a preempted job, so PREEMPTED passes unchanged
    and the plugin keeps waiting for the requeued job, as it is designed to.
    """
    if raw in PLUGIN_FAILURE_STATES:
        return raw
    state = base_state(raw)
    if state == "PREEMPTED" and requeue:
        return raw
    if state in FAILURE_STATES:
        # CANCELLED is the plugin's failure closest to both a scancel and a preemption without requeue.
        return state if state in PLUGIN_FAILURE_STATES else "CANCELLED"
    return raw


def normalise(
    states: dict[str, str], *, requeue: bool = False, log: Callable[[str], Any] | None = None
) -> dict[str, str]:
    """``for_plugin`` over a ``{job id: state}`` map from one status query, logging each rewrite."""
    out = {}
    for job_id, raw in states.items():
        out[job_id] = for_plugin(raw, requeue=requeue)
        if out[job_id] != raw and log is not None:
            log(
                f"SLURM job {job_id} ended as '{raw}'; reported to Snakemake as a failed job "
                f"('{out[job_id]}') so that retries and --keep-going apply"
            )
    return out


def wrap_status_query(query: Callable, requeue: Callable[[], bool]) -> Callable:
    """Wrap the plugin's ``async query_job_status(command, logger) -> (states | None, seconds | None)``."""
    if getattr(query, _WRAPPED, False):
        return query

    @functools.wraps(query)
    async def wrapped(command, logger, *args, **kwargs):
        states, seconds = await query(command, logger, *args, **kwargs)
        if states is None:
            return states, seconds
        return normalise(states, requeue=requeue(), log=logger.warning), seconds

    setattr(wrapped, _WRAPPED, True)
    return wrapped


def _requeue_setting(workflow: Any) -> Callable[[], bool]:
    # Executor settings are attached to the workflow only once execution starts, after the Snakefile is
    # parsed, so they are read at query time.
    def requeue() -> bool:
        settings = getattr(workflow, "executor_settings", None)
        return bool(getattr(settings, "requeue", False))

    return requeue


def install(workflow: Any = None, module: ModuleType | None = None) -> bool:
    """Wrap the SLURM plugin's status query in the running Snakemake process, if the plugin is loaded.

    Returns whether a wrapper is in place. Without the plugin (any other executor) it does nothing.
    """
    module = module if module is not None else sys.modules.get(PLUGIN)
    query = getattr(module, "query_job_status", None)
    if query is None:
        return False
    module.query_job_status = wrap_status_query(query, _requeue_setting(workflow))
    logging.getLogger(__name__).debug("SLURM end-state mapping installed on %s", module.__name__)
    return True
