"""Credentials written into an endpoint URL (``http://user:password@host/v1``).

They are taken out of the URL before any request (and sent as HTTP basic auth), and every copy of the
configuration that a run writes, hashes or logs holds the URL with them replaced by ``REDACTED`` (so
the URL still parses; ``[redacted]`` would not). The only place they stay is the configuration the user
wrote (``config/config.yaml`` and ``--config`` overrides), which each job reads again when it needs them.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "REDACTED"


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return netloc


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without ``user:password@`` and those credentials. They travel as HTTP basic auth instead,
    so that no URL the HTTP library logs or puts in an error message carries them."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    clean = urlunsplit((parts.scheme, _host_port(url), parts.path, parts.query, parts.fragment))
    return clean, (unquote(parts.username or ""), unquote(parts.password or ""))


def redact_url(url: str) -> str:
    """The URL with its user information (user name and password alike) replaced by ``REDACTED``; a URL
    without any is returned unchanged, so hashes of credential-free configurations do not change."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = f"{REDACTED}@{_host_port(url)}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def public_config(data: Any) -> Any:
    """A deep copy of a dumped configuration (or any part of it) with every ``base_url`` redacted: what
    may be written to a file, hashed into a rerun trigger or resume key, or printed."""
    if isinstance(data, dict):
        return {
            k: redact_url(v) if k == "base_url" and isinstance(v, str) else public_config(v)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [public_config(v) for v in data]
    return copy.deepcopy(data)
