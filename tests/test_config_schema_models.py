"""The configuration is defined once, by the JSON schema (src/evoaudit/config.schema.yaml): its names, types,
allowed values, defaults and descriptions. The pydantic models in evoaudit.config give typed access to a
validated document and must say nothing the schema does not: the same keys at every level, the same kind of
value, the same nullability, the same allowed values, and any default they carry equal to the schema's."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel, Field

from evoaudit import config as config_mod

# What validation itself consumes or fills before the models see a document: a role block's ``endpoint``
# (config.resolve_endpoints copies the named endpoint's keys in its place) and ``suite.apex.out`` (null in the
# schema, filled with <results_dir>/suite/apex by config.validate).
_RESOLVED_BEFORE_MODELS = {"endpoint"}
_FILLED_BEFORE_MODELS = {"suite.apex.out"}

_KINDS = {"string": str, "integer": int, "number": float, "boolean": bool, "array": tuple, "object": dict}


def _resolved(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A schema node with its ``allOf`` references laid under its own keywords (as validation sees it)."""
    out: dict[str, Any] = {}
    for part in node.get("allOf", []):
        out = _merge(out, _resolved(_deref(part, root), root))
    return _merge(out, {k: v for k, v in _deref(node, root).items() if k != "allOf"})


def _deref(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        target: Any = root
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return _merge(_resolved(target, root), {k: v for k, v in node.items() if k != "$ref"})
    return node


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without ``| None``, whether None is allowed)."""
    if get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return (args[0] if len(args) == 1 else annotation), len(args) < len(get_args(annotation))
    return annotation, False


def _disagreements(
    model: type[BaseModel], node: dict[str, Any], root: dict[str, Any], where: str
) -> list[str]:
    node = _resolved(node, root)
    props = node.get("properties", {})
    out = []
    fields = model.model_fields
    props = {k: v for k, v in props.items() if k not in _RESOLVED_BEFORE_MODELS or k in fields}
    if set(fields) != set(props):
        out.append(
            f"{where or '(top level)'}: schema keys {sorted(set(props) - set(fields))} missing from "
            f"{model.__name__}, model fields {sorted(set(fields) - set(props))} missing from the schema"
        )
    for name in sorted(set(fields) & set(props)):
        out += _field(fields[name], _resolved(props[name], root), root, f"{where}{name}", model.__name__)
    return out


def _field(field: Any, sub: dict[str, Any], root: dict[str, Any], where: str, owner: str) -> list[str]:
    out = []
    annotation, nullable = _unwrap(field.annotation)
    if isinstance(annotation, typing.ForwardRef):  # a model declared further down config.py
        annotation = getattr(config_mod, annotation.__forward_arg__)
    kinds = sub.get("type", "object" if "properties" in sub else None)
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if nullable != ("null" in kinds) and where not in _FILLED_BEFORE_MODELS:
        out.append(f"{where}: nullable in {'the model' if nullable else 'the schema'} only")
    kind = next((k for k in kinds if k != "null"), None)
    origin = get_origin(annotation) or annotation
    if origin is Literal:
        allowed = {v for v in sub.get("enum", []) if v is not None}
        if set(get_args(annotation)) != allowed:
            model_allows = sorted(get_args(annotation))
            out.append(f"{where}: the model allows {model_allows}, the schema {sorted(allowed)}")
    elif isinstance(origin, type) and issubclass(origin, BaseModel):
        if kind != "object":
            out.append(f"{where}: a {origin.__name__} in the model, {kind} in the schema")
        out += _disagreements(origin, sub, root, f"{where}.")
    elif origin is tuple:
        if kind != "array":
            out.append(f"{where}: a tuple in the model, {kind} in the schema")
        item = get_args(annotation)[0]
        items = _resolved(sub.get("items", {}), root)
        if isinstance(item, type) and issubclass(item, BaseModel):
            out += _disagreements(item, items, root, f"{where}[].")
        elif get_origin(item) is not Literal and _KINDS.get(items.get("type")) not in (item, None):
            out.append(f"{where}[]: {item} in the model, {items.get('type')} in the schema")
    elif _KINDS.get(kind) is not origin and not (kind == "integer" and origin is float):
        out.append(f"{where}: {annotation} in the model, {kind} in the schema")
    if not field.is_required() and field.default_factory is None and "default" in sub:
        default = field.default
        shown = list(default) if isinstance(default, tuple) else default
        if shown != sub["default"]:
            out.append(f"{where}: default {shown!r} in {owner}, {sub['default']!r} in the schema")
    if field.description:
        out.append(f"{where}: described in {owner}; descriptions live in the schema only")
    return out


def test_the_models_agree_with_the_schema_which_defines_the_configuration():
    root = config_mod.schema()
    assert _disagreements(config_mod.Config, root, root, "") == []


class _Small(BaseModel):
    mode: Literal["a", "b"]
    size: int = 3
    url: str | None
    note: str = Field(description="said here")


_SMALL_SCHEMA = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": ["a", "b"]},
        "size": {"type": "integer", "default": 3},
        "url": {"type": ["string", "null"]},
        "note": {"type": "string"},
    },
}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"mode": {"type": "string", "enum": ["a", "b", "c"]}}, "mode: the model allows ['a', 'b']"),
        ({"size": {"type": "integer", "default": 4}}, "size: default 3 in _Small, 4 in the schema"),
        ({"size": {"type": "string", "default": 3}}, "size: <class 'int'> in the model, string"),
        ({"url": {"type": "string"}}, "url: nullable in the model only"),
    ],
)
def test_each_kind_of_disagreement_is_named(change, problem):
    schema = {**_SMALL_SCHEMA, "properties": {**_SMALL_SCHEMA["properties"], **change}}
    found = _disagreements(_Small, schema, schema, "")
    named = [p for p in found if not p.startswith("note:")]
    assert len(named) == 1 and named[0].startswith(problem), found
    assert "note: described in _Small; descriptions live in the schema only" in found


def test_a_model_field_the_schema_lacks_is_named():
    root = config_mod.schema()
    trimmed = _merge(root, {})
    trimmed["properties"] = {k: v for k, v in root["properties"].items() if k != "seed"}
    problems = _disagreements(config_mod.Config, trimmed, root, "")
    assert problems == [
        "(top level): schema keys [] missing from Config, model fields ['seed'] missing from the schema"
    ]
