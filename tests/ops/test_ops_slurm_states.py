"""SLURM end states reach the SLURM executor plugin as failures (evoaudit.ops.slurm_states); no cluster."""

from __future__ import annotations

import ast
import asyncio
import importlib
import importlib.util
import inspect
import re
import sys
import types

import pytest
import yaml
from conftest import REPO

from evoaudit.ops import slurm_states


class RecordingLogger:
    def __init__(self):
        self.warnings: list[str] = []

    def warning(self, msg):
        self.warnings.append(msg)


@pytest.mark.parametrize(
    "raw",
    ["CANCELLED by 0", "CANCELLED by 1000", "CANCELLED+", "PREEMPTED"]
    + ["TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"],
)
def test_cancel_timeout_preemption_node_and_memory_failures_reach_the_plugin_as_failures(raw):
    assert slurm_states.for_plugin(raw) in slurm_states.PLUGIN_FAILURE_STATES


@pytest.mark.parametrize(
    "raw", ["PENDING", "RUNNING", "COMPLETING", "COMPLETED", "REQUEUED", "SUSPENDED", "TIMEOUT", "FAILED"]
)
def test_live_states_and_states_the_plugin_knows_pass_unchanged(raw):
    assert slurm_states.for_plugin(raw) == raw


def test_preemption_is_left_to_slurm_when_the_plugin_asks_it_to_requeue():
    assert slurm_states.for_plugin("PREEMPTED", requeue=True) == "PREEMPTED"
    assert slurm_states.for_plugin("CANCELLED by 0", requeue=True) == "CANCELLED"


def test_wrapped_status_query_rewrites_hanging_states_and_logs_the_job_and_its_slurm_state():
    async def query(command, logger):
        assert command == "sacct --name run"
        return {"11": "CANCELLED by 0", "12": "RUNNING", "13": "COMPLETED", "14": "PREEMPTED"}, 0.01

    logger = RecordingLogger()
    wrapped = slurm_states.wrap_status_query(query, requeue=lambda: False)
    states, seconds = asyncio.run(wrapped("sacct --name run", logger))
    assert states == {"11": "CANCELLED", "12": "RUNNING", "13": "COMPLETED", "14": "CANCELLED"}
    assert seconds == 0.01
    assert len(logger.warnings) == 2
    assert "SLURM job 11 ended as 'CANCELLED by 0'" in logger.warnings[0]
    assert "SLURM job 14 ended as 'PREEMPTED'" in logger.warnings[1]


def test_a_failed_status_query_passes_through_for_the_plugin_to_retry():
    async def query(command, logger):
        return None, None

    wrapped = slurm_states.wrap_status_query(query, requeue=lambda: False)
    assert asyncio.run(wrapped("sacct", RecordingLogger())) == (None, None)


def test_install_wraps_the_plugins_status_query_once_and_reads_requeue_at_query_time():
    async def query(command, logger):
        return {"7": "PREEMPTED"}, 0.0

    plugin = types.ModuleType("fake_slurm_plugin")
    plugin.query_job_status = query
    workflow = types.SimpleNamespace(executor_settings=None)  # set only once execution starts
    assert slurm_states.install(workflow, module=plugin)
    first = plugin.query_job_status
    assert slurm_states.install(workflow, module=plugin)
    assert plugin.query_job_status is first  # not wrapped twice
    workflow.executor_settings = types.SimpleNamespace(requeue=True)
    assert asyncio.run(plugin.query_job_status("sacct", RecordingLogger()))[0] == {"7": "PREEMPTED"}


def test_install_does_nothing_without_the_plugin(monkeypatch):
    monkeypatch.delitem(sys.modules, slurm_states.PLUGIN, raising=False)
    assert not slurm_states.install(None)
    assert not slurm_states.install(None, module=types.ModuleType("other_executor"))


def test_profile_keeps_slurm_from_requeueing_so_preempted_is_an_end_state():
    profile = yaml.safe_load((REPO / "workflow/profiles/slurm/config.yaml").read_text())
    assert profile.get("slurm-no-requeue") is True
    assert not profile.get("slurm-requeue")


def test_installed_plugin_still_matches_failure_states_exactly():
    """Fails when the plugin changes how it matches states: then see whether slurm_states can go."""
    if importlib.util.find_spec(slurm_states.PLUGIN) is None:
        pytest.skip("snakemake-executor-plugin-slurm is not installed (pip install -e .[slurm])")
    plugin = importlib.import_module(slurm_states.PLUGIN)
    source = inspect.getsource(plugin.Executor.check_active_jobs)
    # The method holds a string at column 0, so it cannot be parsed on its own; the tuple literal can.
    fail_stati = re.search(r"fail_stati = (\([^)]*\))", source)
    assert fail_stati, "the plugin no longer lists its failure states in check_active_jobs"
    assert ast.literal_eval(fail_stati[1]) == slurm_states.PLUGIN_FAILURE_STATES
    assert "status in fail_stati" in source  # exact membership: "CANCELLED by 0" is not in it
    assert 'status == "PREEMPTED"' in source  # preemption waits for a requeue
    # The wrapper replaces the module-level name that the status check calls.
    assert "query_job_status(" in source and callable(plugin.query_job_status)
