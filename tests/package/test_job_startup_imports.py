"""A workflow job is one Python process: what its stage script imports is paid once per job, and a run has
hundreds of jobs. AgentDojo's runner module imports every provider SDK it supports (about 2 s of CPU);
evoaudit uses AgentDojo's runner only under ``agent.profile: agentdojo``, so no stage script's imports may
load those SDKs."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO

# SDKs that only AgentDojo's runner module (agentdojo.agent_pipeline.agent_pipeline) brings in.
RUNNER_ONLY = ("anthropic", "cohere", "agentdojo.agent_pipeline.agent_pipeline")


def test_no_stage_script_imports_agentdojos_runner_and_its_provider_sdks():
    modules = sorted(
        {
            m
            for script in (REPO / "scripts").glob("*.py")
            for m in re.findall(r"^\s*from (evoaudit[\w.]*) import", script.read_text(), re.M)
        }
    )
    assert len(modules) > 20, modules  # the scan found the scripts' imports
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules)
    code += f"print(' '.join(m for m in {RUNNER_ONLY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [], f"a stage script's imports load {out.split()}"
