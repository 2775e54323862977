"""The method plug-in point: every self-evolving method is found through the Python entry point group
``evoaudit.methods`` (the convention pytest and Inspect use), built-in ones included (pyproject.toml).

An entry point's name is the method's name; its value is a class (instantiated with no arguments) or an
object implementing ``evoaudit.methods.protocol.Method``. A package declares it in its own pyproject.toml::

    [project.entry-points."evoaudit.methods"]
    my-memory = "evoaudit_my_memory:MyMemory"

Names resolve from the installed distributions' metadata alone; a method's object is loaded (its module
imported) only when something asks for it: its insertions, whether it learns, its evolution. This module
sits beside the layers (like ``config``) so that the configuration and the seal can resolve a name
without importing the methods layer; the object it loads belongs to that layer.

Conditions are named after methods: ``<method>`` or ``<method>-<insertion>`` (the method's
``insertions`` list which), and ``placebo-<method>`` for the placebo of any method that learns.
"""

from __future__ import annotations

import difflib
import functools
from importlib.metadata import EntryPoint, entry_points
from typing import Any

GROUP = "evoaudit.methods"
PLACEBO_PREFIX = "placebo-"
# Method and condition names: lower case words joined by "-" (a method's name never starts with "placebo-":
# _registered refuses one).
NAME_PATTERN = r"^[a-z][a-z0-9_]*(-[a-z0-9_]+)*$"
CONDITION_PATTERN = r"^[a-z][a-z0-9_]*(-[a-z0-9_]+)*$"
# The methods evoaudit itself registers: their absence means the package's metadata predates the plug-in
# point (an editable install made before it), not that they were removed.
BUILT_IN = ("static", "skillopt", "awm", "reasoningbank", "ace", "dc-cu", "dc-rs")


class MethodPluginError(ValueError):
    """A method name that no installed package registers, or a registration that cannot be used."""


@functools.cache
def _registered() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        if ep.name in found and found[ep.name].value != ep.value:
            raise MethodPluginError(
                f"method {ep.name!r} is registered twice ({found[ep.name].value} and {ep.value}); "
                "uninstall one of the two packages"
            )
        if ep.name.startswith(PLACEBO_PREFIX):
            raise MethodPluginError(
                f"method {ep.name!r} ({ep.value}): a method's name may not start with 'placebo-'"
            )
        found.setdefault(ep.name, ep)
    missing = [n for n in BUILT_IN if n not in found]
    if missing:
        raise MethodPluginError(
            f"the built-in methods {missing} are not registered under the entry point group {GROUP!r}: "
            "evoaudit's installed metadata is older than its source; reinstall it (pip install -e .)"
        )
    return found


def method_names() -> tuple[str, ...]:
    """Every installed method: evoaudit's own first (in their order), then the others by name."""
    reg = _registered()
    return tuple(n for n in BUILT_IN if n in reg) + tuple(sorted(n for n in reg if n not in BUILT_IN))


def is_method(name: str) -> bool:
    return name in _registered()


def unknown(name: str, kind: str = "method") -> str:
    """Why ``name`` is not usable, naming what is installed (and the closest installed name)."""
    names = method_names()
    close = difflib.get_close_matches(name.removeprefix(PLACEBO_PREFIX), names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    what = "an installed method" if kind == "method" else f"a {kind} of any installed method"
    return (
        f"{name!r} is not {what}; {hint}installed methods: {', '.join(names)} "
        f"(a method is a package registering an entry point in the group {GROUP!r}; see docs/methods.md)"
    )


@functools.cache
def load(name: str) -> Any:
    """The method registered as ``name`` (its module imported once per process)."""
    reg = _registered()
    if name not in reg:
        raise MethodPluginError(unknown(name))
    obj = reg[name].load()
    if isinstance(obj, type):
        obj = obj()
    if getattr(obj, "name", None) != name:
        raise MethodPluginError(
            f"entry point {name!r} ({reg[name].value}) loads an object whose name is "
            f"{getattr(obj, 'name', None)!r}; the entry point's name and the method's name must agree"
        )
    return obj


def package(name: str) -> dict[str, str | None]:
    """The distribution that registers method ``name``: its name and version (for provenance)."""
    ep = _registered()[name]
    dist = ep.dist
    return {
        "method": name,
        "entry_point": ep.value,
        "package": dist.name if dist is not None else None,
        "version": dist.version if dist is not None else None,
    }


def method_of(condition: str) -> str | None:
    """The method whose artifact (or placebo) ``condition`` deploys, by name alone; None when no installed
    method's name fits. ``<method>-<insertion>`` goes to the longest method name that prefixes it."""
    base = condition.removeprefix(PLACEBO_PREFIX)
    names = method_names()
    if base != condition:
        return base if base in names else None
    fits = [n for n in names if condition == n or condition.startswith(n + "-")]
    return max(fits, key=len) if fits else None


def check_condition(condition: str, load_method: bool = True) -> str:
    """The method of ``condition``, or MethodPluginError saying why it is not a condition: no installed
    method by that name, or (``load_method``) an insertion the method does not list. Loading a method
    imports its code, so the configuration's own check passes ``load_method=False`` and the insertions are
    checked where the condition is parsed (``methods.conditions.check_conditions``, when the workflow or a
    command starts); so is whether ``placebo-<method>`` has a method that learns."""
    method = method_of(condition)
    if method is None:
        raise MethodPluginError(unknown(condition, "condition"))
    if load_method and not condition.startswith(PLACEBO_PREFIX) and condition != method:
        insertions = dict(load(method).insertions)
        if condition not in insertions:
            raise MethodPluginError(
                f"{condition!r}: method {method!r} has the conditions {sorted(insertions)} (its insertions)"
            )
    return method


def learns(name: str) -> bool:
    """Whether method ``name`` evolves state (False for the identity)."""
    return bool(load(name).learns)
