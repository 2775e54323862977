"""A job's start-up imports only what it uses: every evaluation and replay job pays for them once."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import evoaudit.evaluate.stage, evoaudit.replay.stage, evoaudit.suite.environments
assert "pandas" not in sys.modules, "pandas was imported at start-up"
from agentdojo.task_suite.load_suites import get_suite
assert get_suite("v1", "travel").name == "travel"  # deepdiff's users load without pandas
import pandas
from deepdiff import DeepDiff
assert DeepDiff({"a": 1}, {"a": 2}) and pandas.DataFrame({"a": [1]}).shape == (1, 1)
print("ok")
"""


def test_evaluation_and_replay_jobs_start_without_pandas_which_still_imports_afterwards():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
