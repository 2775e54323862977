"""The methods by name: the one place in the methods layer that answers which method a name means.

Every method, built-in or not, is an entry point of the group ``evoaudit.methods``
(``evoaudit.method_plugins``); nothing here lists them.
"""

from __future__ import annotations

from typing import cast

from evoaudit import method_plugins
from evoaudit.methods.protocol import Method


def installed() -> tuple[str, ...]:
    """The names of every installed method (evoaudit's own first)."""
    return method_plugins.method_names()


def get_method(name: str) -> Method:
    try:
        return cast(Method, method_plugins.load(name))
    except method_plugins.MethodPluginError as exc:
        raise ValueError(f"unknown method: {exc}") from None


def method_package(name: str) -> dict[str, str | None]:
    """The package that registers ``name`` and its version (recorded in each artifact's provenance)."""
    return method_plugins.package(name)
