"""What a configuration file may be before it is parsed: its size, UTF-8, YAML aliases, nodes, list items and
depth, checked on the raw text and while YAML builds the document (``read_config_file``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from evoaudit.config.errors import ConfigError

# Input limits, checked before anything walks the document: a configuration is a few kilobytes, and
# validation, hashing and dumping all walk it node by node (shared YAML aliases counted once per use).
MAX_CONFIG_BYTES = 1 << 20


MAX_ALIASES = 16


MAX_NODES = 100_000


MAX_LIST_ITEMS = 10_000


MAX_DEPTH = 32


def _check_shape(data: Any, source: str) -> None:
    """Refuse a document too large to validate: too many nodes (aliases expanded), too long a list or too
    deep a nesting. Stops at the first limit, so it never walks more than ``MAX_NODES`` nodes."""
    stack: list[tuple[Any, str, int]] = [(data, "(top level)", 0)]
    nodes = 0
    while stack:
        node, where, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise ConfigError(
                f"{source}: the configuration has more than {MAX_NODES} values (YAML aliases expanded); "
                "a configuration is a few hundred - remove the repeated or generated content"
            )
        if depth > MAX_DEPTH:
            raise ConfigError(f"{source}: {where}: nested more than {MAX_DEPTH} levels deep; flatten it")
        if isinstance(node, dict):
            stack.extend((v, f"{k}" if depth == 0 else f"{where}.{k}", depth + 1) for k, v in node.items())
        elif isinstance(node, list | tuple):
            if len(node) > MAX_LIST_ITEMS:
                raise ConfigError(
                    f"{source}: {where}: a list of {len(node)} items; at most {MAX_LIST_ITEMS} are allowed"
                )
            stack.extend((v, f"{where}.{i}", depth + 1) for i, v in enumerate(node))


def _unshared(node: Any) -> Any:
    """A copy in which no mapping or list appears twice. YAML aliases (``*ep``) and deepcopy both keep one
    object in two places, and filling one role's defaults into it would fill the other's."""
    if isinstance(node, dict):
        return {k: _unshared(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_unshared(v) for v in node]
    return node


class _OverLimit(yaml.YAMLError):
    pass


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with at most ``MAX_ALIASES`` alias uses (``*name``, ``<<: *name``): a few
    anchors stay usable, a billion-laughs document is refused while it is parsed. Nesting is bounded while
    composing (the composer recurses, so a deep document would otherwise end in a RecursionError), and a key
    written twice in one mapping is refused instead of the last one silently winning."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _OverLimit(f"more than {MAX_ALIASES} YAML aliases")
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _OverLimit(f"nested more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    raise _OverLimit(
                        f"the key {key_node.value[:80]!r} is written twice in one mapping "
                        f"(line {key_node.start_mark.line + 1})"
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The document of a configuration file, within the input limits: at most ``MAX_CONFIG_BYTES``, UTF-8,
    at most ``MAX_ALIASES`` YAML aliases, a mapping."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such configuration file") from exc
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{path}: {size} bytes; a configuration file may have at most {MAX_CONFIG_BYTES} bytes (1 MiB)"
        )
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)  # the file may have grown since stat
    except OSError as exc:  # a directory, no read permission, a device that fails
        raise ConfigError(f"{path}: cannot be read as a configuration file ({exc.strerror})") from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: more than {MAX_CONFIG_BYTES} bytes; a configuration file may have 1 MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at offset {exc.start}); save the "
            "file as UTF-8"
        ) from exc
    loader = _BoundedLoader(text)
    try:
        raw = loader.get_single_data()
    except _OverLimit as exc:
        raise ConfigError(
            f"{path}: {exc} (at line {loader.line + 1}); at most {MAX_ALIASES} alias uses and {MAX_DEPTH} "
            "levels of nesting are allowed, each key once per mapping"
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    except (ValueError, OverflowError) as exc:  # a scalar its type cannot hold: a 5000-digit int, 2026-99-99
        raise ConfigError(f"{path}: a value near line {loader.line + 1} cannot be read: {exc}") from exc
    finally:
        loader.dispose()
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the configuration must be a mapping, got {type(raw).__name__}")
    return raw
