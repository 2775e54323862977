"""The one error a configuration raises: it names the file, the field and the fix."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is not allowed; the message names the file, the field and the fix."""
