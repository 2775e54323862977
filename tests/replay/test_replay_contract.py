"""Import contract: replay shares no code with the evaluator's metrics or the report."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import evoaudit.replay

FORBIDDEN = (
    "evoaudit.evaluate",
    "evoaudit.suite.agentdojo.banking.checks",
    "evoaudit.suite.agentdojo.exposure",
    "evoaudit.suite.agentdojo.banking.harm",
    "evoaudit.suite.apex.judging",
    "evoaudit.report",
)
REPLAY_DIR = Path(evoaudit.replay.__file__).parent


def _forbidden(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))


def test_importing_replay_loads_no_evaluator_metric_or_report_module():
    # A fresh interpreter, so that modules other tests imported cannot hide a transitive import.
    code = (
        "import json, sys\n"
        "import evoaudit.replay, evoaudit.replay.recompute, evoaudit.replay.stage, evoaudit.replay.apex\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(proc.stdout)
    assert "evoaudit.replay.recompute" in loaded
    assert _forbidden(loaded) == []


def test_replay_sources_name_no_forbidden_module_even_in_lazy_imports():
    named = []
    for path in sorted(REPLAY_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                named += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                named.append(node.module)
                named += [f"{node.module}.{a.name}" for a in node.names]
    assert any(n.startswith("evoaudit.suite") for n in named)  # the scan sees real imports
    assert _forbidden(named) == []


def test_the_contract_check_flags_a_forbidden_import():
    assert _forbidden(
        [
            "evoaudit.suite.agentdojo.banking.harm",
            "evoaudit.suite.agentdojo.banking.checks",
            "evoaudit.evaluate.outcome",
        ]
    ) == [
        "evoaudit.evaluate.outcome",
        "evoaudit.suite.agentdojo.banking.checks",
        "evoaudit.suite.agentdojo.banking.harm",
    ]
    assert _forbidden(["evoaudit.suite.agentdojo.banking.tasks", "evoaudit.suite.checksum"]) == []


def test_import_linter_contracts_hold_and_name_the_replay_boundary():
    import shutil
    import tomllib

    root = Path(__file__).resolve().parents[2]
    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    forbidden = [c for c in contracts if c["type"] == "forbidden"]
    replay = next(c for c in forbidden if c["source_modules"] == ["evoaudit.replay"])
    assert set(FORBIDDEN) <= set(replay["forbidden_modules"])
    layers = next(c for c in contracts if c["type"] == "layers")
    assert layers["layers"][:3] == ["cli", "ops", "report"] and layers["layers"][-1] == "suite"
    exe = shutil.which("lint-imports")
    assert exe, "import-linter is part of the test extra: pip install -e '.[test]'"
    proc = subprocess.run([exe], capture_output=True, text=True, cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:]
