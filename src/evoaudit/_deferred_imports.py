"""Keep AgentDojo's provider SDKs out of every job's start-up.

Importing any submodule of ``agentdojo.agent_pipeline`` runs that package's ``__init__``, which imports
every LLM provider client AgentDojo supports (about 2 s of CPU per process). evoaudit needs only a few of
its submodules (tool-result formatting, the base class the task suites reference), and a workflow starts
one process per job. So the package is registered without running its ``__init__``; the first lookup of
any name on it runs the real ``__init__``, so code that does need it still gets the full package.

AgentDojo's suite registry also imports deepdiff (for its travel and workspace tasks), and deepdiff imports
pandas if it can (about 0.4 s), only to hash DataFrames, which no AgentDojo task gives it. So deepdiff is
loaded with pandas hidden, unless pandas is already loaded; ``import pandas`` works as usual afterwards.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path

_NAME = "agentdojo.agent_pipeline"


class _DeepdiffWithoutPandas(importlib.abc.MetaPathFinder):
    """Finds ``deepdiff`` once (then leaves ``sys.meta_path``) and runs its package with pandas hidden."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> object:
        if fullname != "deepdiff":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)  # type: ignore[arg-type]
        if spec is None or spec.loader is None or "pandas" in sys.modules:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            sys.modules["pandas"] = None  # type: ignore[assignment]  # `import pandas` raises ImportError
            try:
                run(module)
            finally:
                if "pandas" in sys.modules and sys.modules["pandas"] is None:
                    del sys.modules["pandas"]

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def defer_agentdojo_pipeline() -> None:
    hooked = any(isinstance(f, _DeepdiffWithoutPandas) for f in sys.meta_path)
    if "deepdiff" not in sys.modules and not hooked:
        sys.meta_path.insert(0, _DeepdiffWithoutPandas())
    if _NAME in sys.modules:
        return
    spec = importlib.util.find_spec("agentdojo")
    if spec is None or not spec.submodule_search_locations:
        return
    pkg_dir = Path(next(iter(spec.submodule_search_locations))) / "agent_pipeline"
    init = pkg_dir / "__init__.py"
    if not init.is_file():
        return
    module = types.ModuleType(_NAME)
    module.__file__ = str(init)
    module.__path__ = [str(pkg_dir)]
    module.__package__ = _NAME

    def __getattr__(attr: str):  # noqa: N807 - module-level __getattr__ (PEP 562)
        if attr.startswith("__"):
            raise AttributeError(attr)
        del module.__dict__["__getattr__"]
        exec(compile(init.read_text(), str(init), "exec"), module.__dict__)
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {_NAME!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__
    sys.modules[_NAME] = module
