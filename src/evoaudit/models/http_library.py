"""Which HTTP library the installed openai client is built on (``httpx``, or its successor), and the
httpcore package under it: the HTTP path is written against those, found from the client itself."""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import openai


def http_library() -> ModuleType:
    """The HTTP library the installed openai client is built on."""
    for cls in openai.DefaultAsyncHttpxClient.__mro__:
        root = cls.__module__.split(".")[0]
        if root not in ("openai", "builtins"):
            return importlib.import_module(root)
    return importlib.import_module("httpx")


@functools.cache
def http_core() -> ModuleType:
    """The httpcore package under the HTTP library (``httpcore``, or its successor's)."""
    pool = type(http_library().AsyncHTTPTransport()._pool)
    return importlib.import_module(pool.__module__.split(".")[0])
