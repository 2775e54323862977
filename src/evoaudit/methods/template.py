"""The template package of a method of one's own (``evoaudit new-method NAME``; docs/methods.md).

It writes a complete, installable package: a pyproject.toml registering the method under the entry point
group ``evoaudit.methods``, and a module whose method keeps one note per failed acquisition trajectory
(the calls that attempt made) and inserts the notes as one system-prompt section. It runs as it is; a
researcher replaces ``evolve`` (and, where the artifact is not one text file, the hooks listed in it).
"""

from __future__ import annotations

import re
from pathlib import Path

from evoaudit.method_plugins import GROUP, NAME_PATTERN, is_method

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "evoaudit-{name}"
version = "0.1.0"
description = "The {name} method, audited by evoaudit"
requires-python = ">=3.11"
dependencies = ["evoaudit"]

# The entry point makes the method known to evoaudit: its name is the method's name in the config.
[project.entry-points."{group}"]
{name} = "{module}:{cls}"

[tool.setuptools]
packages = ["{module}"]
"""

_MODULE = '''\
"""The {name} method for evoaudit (docs/methods.md: the Method protocol and what each hook is for)."""

from __future__ import annotations

from typing import Any

from evoaudit.methods.protocol import EvolveInputs, MethodBase

STATE_FILE = "{name}.md"


class {cls}(MethodBase):
    """One note per failed acquisition trajectory, inserted as one system-prompt section.

    MethodBase supplies the rest for a one-file text artifact: one insertion (the condition '{name}'), a
    placebo that keeps the file's Markdown shape and line lengths ('placebo-{name}'), labels from
    methods_params.success_label and no answer budget to check. Override deploy, placebo, deployed_chars,
    insertions, success_label, check_budgets or validation_rollouts where the method differs; no hook is
    given the whole configuration (success_label and validation_rollouts take the methods_params section,
    check_budgets the method's view, evoaudit.config.MethodSettings).
    """

    name = "{name}"
    state_file = STATE_FILE
    section = "{title} notes"

    async def evolve(self, inputs: EvolveInputs) -> tuple[dict[str, str], dict[str, Any]]:
        # inputs.labelled: (rollout, success) pairs; inputs.optimizer: the optimizer endpoint (a
        # ChatBackend; evoaudit.methods.common.call_structured asks it with retries); inputs.settings: the
        # method's view of the configuration (seed, methods_params, optimizer_max_tokens, suite_name);
        # inputs.episodes: runs the executor on learning instances with candidate sections, for a method
        # that validates by episodes; inputs.prior: the previous round's artifact directory in a
        # multi-round audit, else None.
        notes = []
        for rollout, success in inputs.labelled:
            if not success:
                calls = ", ".join(c.function for c in rollout.calls) or "no tool"
                notes.append(f"- A failed attempt called {{calls}}; check each value before acting.")
        text = "\\n".join(notes) + "\\n" if notes else ""
        return {{STATE_FILE: text}}, {{"notes": len(notes)}}
'''


def package_names(name: str) -> tuple[str, str, str]:
    """The package directory, module and class names of method ``name``."""
    words = re.split(r"[-_]", name)
    return f"evoaudit-{name}", "evoaudit_" + "_".join(words), "".join(w.capitalize() for w in words)


def write_template(name: str, parent: Path) -> list[Path]:
    """Write the template package of method ``name`` under ``parent``; the files written."""
    if not re.fullmatch(NAME_PATTERN, name) or name.startswith("placebo-"):
        raise ValueError(
            f"{name!r} cannot name a method: use lower-case words joined by '-' (e.g. my-memory), not "
            "starting with 'placebo-'"
        )
    if is_method(name):
        raise ValueError(f"a method named {name!r} is already installed; choose another name")
    directory, module, cls = package_names(name)
    root = parent / directory
    if root.exists():
        raise ValueError(f"{root} already exists; remove it or choose another directory")
    fill = {
        "name": name,
        "group": GROUP,
        "module": module,
        "cls": cls,
        "title": name.replace("-", " ").capitalize(),
    }
    files = {
        root / "pyproject.toml": _PYPROJECT.format(**fill),
        root / module / "__init__.py": _MODULE.format(**fill),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)
