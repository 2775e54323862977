"""The sandbox starts wherever the audit's Python lives: a pyenv-style Python and a virtual environment both
under a home directory the sandbox user cannot enter (root's, mode 700), as a newcomer cloning into their
home as root has them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from evoaudit.suite.apex.runtime.isolation import HOST_DROP_ID, _closed_ancestor, sandbox_works

HOME = Path(os.path.expanduser("~"))
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the drop to nobody and its mount chain run only as root"),
    pytest.mark.skipif(not sandbox_works("bwrap"), reason="bubblewrap does not start here"),
    pytest.mark.skipif(
        _closed_ancestor(str(HOME), HOST_DROP_ID) is None, reason="the home directory is open to nobody here"
    ),
    # Else only the venv would be in the closed directory, not the pyenv-style Python under it.
    pytest.mark.skipif(
        _closed_ancestor(sys.base_prefix, HOST_DROP_ID) is None,
        reason="this test run's base Python is not under a directory closed to nobody",
    ),
]

PROGRAM = """
from evoaudit.suite.apex.base.workspace import Workspace
from evoaudit.suite.apex.runtime import tools
ws = Workspace("w", "ana@firm.com", ("firm.com",))
ws.settings.sandbox = "bwrap"
out, err = tools.call_tool(ws, "run_command", {"command": "python -c 'import sys; print(sys.prefix)'"})
print(repr(err), out)
"""


@pytest.fixture
def home_venv():
    """A venv under the closed home directory, over this test run's base Python, that imports evoaudit."""
    root = Path(tempfile.mkdtemp(prefix="evoaudit-venv-", dir=HOME))
    root.chmod(0o755)  # as `python -m venv` makes it; the home directory above stays closed
    try:
        subprocess.run(
            [os.path.join(sys.base_prefix, "bin", "python3"), "-m", "venv", "--without-pip", str(root)],
            check=True,
            capture_output=True,
        )
        site = next(root.glob("lib/python*/site-packages"))
        (site / "evoaudit_here.pth").write_text(
            f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
        )
        yield root / "bin" / "python"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_run_command_works_with_a_venv_and_its_python_both_in_a_closed_home(home_venv):
    proc = subprocess.run(
        [str(home_venv), "-c", PROGRAM], capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines() == ["None [exit code 0]", "/opt/venv"], proc.stdout
