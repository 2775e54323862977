"""The configuration's JSON schema, generated from the pydantic models in ``evoaudit.config``.

The models are the one definition of the configuration (keys, kinds, allowed values, defaults and, in the
docstring under each field, its description, read from the models' source as pydantic's
``use_attribute_docstrings`` would). This module turns them into the JSON schema that
``config.validate`` applies and whose defaults it fills (``src/evoaudit/config.schema.yaml``;
``workflow/schemas/config.schema.yaml`` is a link to it, for Snakemake's ``validate``):

    python -m evoaudit.config_schema            # rewrite the schema file from the models
    python -m evoaudit.config_schema --check    # exit 1 when the file differs from what the models give

pydantic's ``model_json_schema`` is shaped into what default filling needs (jsonschema's ``properties``
hook, as Snakemake's ``validate`` and ``config.validate`` use it, fills a key's ``default`` only where the
key's schema sits in place): references are inlined, a nested section defaults to ``{}`` (each of its keys
then takes its own default), ``X | None`` becomes ``type: [X, "null"]`` and a dict with a key pattern
``propertyNames`` plus ``additionalProperties``, as a hand-written schema would say it.
"""

from __future__ import annotations

import argparse
import ast
import copy
import inspect
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import to_jsonable_python

from evoaudit.config import Config, overlay

#: The schema file ``config.schema()`` reads (package data).
SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")
#: The command that rewrites it, named wherever the file is found out of date.
REGENERATE = "python -m evoaudit.config_schema"

_HEADER = (
    "# Generated from the pydantic models in src/evoaudit/config/model.py (the docstring under a field is\n"
    f"# its description) by `{REGENERATE}`; edit the models, never this file.\n"
)

# Key order in the written file: what a value is, then its default and description, then its keys.
_ORDER = (
    "$schema",
    "title",
    "type",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "propertyNames",
    "required",
    "additionalProperties",
    "default",
    "description",
    "properties",
)


def _minimal(value: Any) -> Any:
    """``value`` as JSON, each model reduced to the fields that differ from that field's own default (the
    schema fills the rest): a section's default is ``{}``, the attacker's
    ``{model: evoaudit-sim-attacker}``."""
    if isinstance(value, BaseModel):
        out = {}
        for name, field in type(value).model_fields.items():
            own = getattr(value, name)
            if field.is_required() or own != field.get_default(call_default_factory=True):
                out[name] = _minimal(own)
        return out
    if isinstance(value, list | tuple):
        return [_minimal(v) for v in value]
    if isinstance(value, dict):
        return {k: _minimal(v) for k, v in value.items()}
    return to_jsonable_python(value)


class _Generator(GenerateJsonSchema):
    def get_default_value(self, schema: Any) -> Any:
        # pydantic leaves a default_factory's value out of the schema; default filling needs it.
        if "default_factory" in schema and not schema.get("default_factory_takes_data"):
            return _minimal(schema["default_factory"]())
        default = schema.get("default", NoDefault)
        return default if default is NoDefault else _minimal(default)


def _docstrings(model: type[BaseModel]) -> tuple[str, dict[str, dict[str, str]]]:
    """(the class docstring of ``model``, {class: {field: the docstring under it}}) for every class of the
    module ``model`` is defined in: pydantic's ``use_attribute_docstrings`` reading, done once here rather
    than at every import of the models."""
    tree = ast.parse(inspect.getsource(sys.modules[model.__module__]))
    top, fields = "", {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        if node.name == model.__name__:
            top = ast.get_docstring(node) or ""
        docs = {}
        for field, after in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[field.target.id] = inspect.cleandoc(after.value.value)
        fields[node.name] = docs
    return top, fields


def _describe(schema: dict[str, Any], defs: dict[str, Any], model: type[BaseModel]) -> None:
    """Each field's docstring as its property's description, in place (a field's own description set
    otherwise, as for a role block's ``endpoint``, stays)."""
    top, docs = _docstrings(model)
    schema["description"] = top
    for name, node in [(model.__name__, schema), *defs.items()]:
        for field, text in docs.get(name, {}).items():
            if field in node.get("properties", {}):
                node["properties"][field]["description"] = text


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``$ref`` replaced by a copy of its definition, the referring node's own keys laid
    over it (a role's ``properties: {temperature: {default: 1.0}}`` over the endpoint's). A definition's
    class docstring is not a description: the field's docstring is."""
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _inline(v, defs) for k, v in node.items()}
    if "$ref" in node:
        target = copy.deepcopy(defs[node.pop("$ref").removeprefix("#/$defs/")])
        target.pop("description", None)
        node = overlay(_inline(target, defs), node)
    return node


def _shape(node: Any) -> Any:
    """pydantic's spellings turned into the schema's: no titles, ``X | None`` as ``type: [X, "null"]``, a
    constant as a one-value ``enum``, a dict's key pattern as ``propertyNames``, descriptions on one line."""
    if isinstance(node, list):
        return [_shape(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _shape(v) for k, v in node.items() if k != "title"}
    if "const" in node:
        node["enum"] = [node.pop("const")]
    options = node.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        (inner,) = [o for o in options if o != {"type": "null"}]
        node.pop("anyOf")
        node = {**inner, **node, "type": [inner["type"], "null"]}
        if "enum" in node:
            node["enum"] = [*node["enum"], None]
    if node.get("additionalProperties") is True:  # dict[str, Any]: any value, which a bare object says
        node.pop("additionalProperties")
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict) and len(patterns) == 1 and "additionalProperties" not in node:
        # pydantic admits a key outside the pattern; the configuration refuses it.
        ((pattern, values),) = patterns.items()
        node.pop("patternProperties")
        node["propertyNames"] = {"pattern": pattern}
        node["additionalProperties"] = values
    if isinstance(node.get("description"), str):
        node["description"] = " ".join(node["description"].split())
    rank = {k: i for i, k in enumerate(_ORDER)}
    return dict(sorted(node.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def generate() -> dict[str, Any]:
    """The configuration's JSON schema (draft 2020-12), from ``Config``."""
    raw = Config.model_json_schema(schema_generator=_Generator)
    defs = raw.pop("$defs", {})
    _describe(raw, defs, Config)
    shaped = _shape(_inline(raw, defs))
    head = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "evoaudit configuration",
        "description": shaped.pop("description"),
    }
    return head | shaped


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None  # a multi-line default (the initial skill) stays readable
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
    # A list of plain values on one line (enums, default lists); mappings stay in block style.
    flow = all(not isinstance(v, dict | list) for v in value)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(list, _list)


def render() -> str:
    """The schema file's text: the header saying how it is made, then the schema as YAML."""
    body = yaml.dump(
        generate(), Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True, default_flow_style=False
    )
    return _HEADER + body


def write(path: Path | None = None) -> bool:
    """Rewrite ``path`` (the package's schema file) from the models; whether it changed."""
    path = path or SCHEMA_PATH
    text = render()
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evoaudit.config_schema",
        description="Write the configuration's JSON schema (src/evoaudit/config.schema.yaml, linked from "
        "workflow/schemas/) from the pydantic models in evoaudit.config.",
    )
    parser.add_argument(
        "--check", action="store_true", help="only check; exit 1 when the file is out of date"
    )
    args = parser.parse_args(argv)
    if args.check:
        current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
        if current != render():
            print(f"{SCHEMA_PATH}: out of date with the models in evoaudit.config; run `{REGENERATE}`")
            return 1
        print(f"{SCHEMA_PATH}: up to date")
        return 0
    changed = write()
    print(f"{SCHEMA_PATH}: {'rewritten' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
