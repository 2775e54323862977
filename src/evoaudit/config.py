"""Load, validate and type the configuration.

The JSON schema (``config.schema.yaml``, also at ``workflow/schemas/``) is the single source of truth for
what is allowed, for every default and for every field's description; the pydantic models below only give
typed access afterwards (tests/test_config_schema_models.py holds them to the schema). ``stage_config`` is
the one answer to which configuration a stage depends on (rerun triggers, resume keys, provenance).
"""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import importlib.util
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import jsonschema
import yaml
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from evoaudit.credentials import public_config, split_credentials
from evoaudit.hashing import sha256_json

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A configuration value is not allowed; the message names the file, the field and the fix."""


@functools.cache
def schema() -> dict[str, Any]:
    return yaml.safe_load(resources.files("evoaudit").joinpath("config.schema.yaml").read_text())


def _with_defaults(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


_Validator = _with_defaults(jsonschema.Draft202012Validator)


def _describe(error: jsonschema.ValidationError) -> str:
    field = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    allowed = ""
    sch = error.schema if isinstance(error.schema, dict) else {}
    if "enum" in sch:
        allowed = f"; allowed: {', '.join(map(str, sch['enum']))}"
    elif error.validator in (
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "pattern",
        "type",
        "minItems",
        "maxItems",
    ):
        allowed = f"; required: {error.validator} {error.validator_value}"
    elif error.validator == "additionalProperties":
        allowed = f"; allowed keys: {', '.join(sorted(sch.get('properties', {})))}"
    return f"{field}: {error.message}{allowed}"


def _unknown_keys(error: jsonschema.ValidationError, files: tuple[str | Path, ...]) -> list[str]:
    """One line per key the schema does not allow: the nearest allowed key (difflib) as a suggestion, and
    the configuration file the key was written in, when it is one of ``files``."""
    sch = error.schema if isinstance(error.schema, dict) else {}
    props = sorted(sch.get("properties", {}))
    patterns = list(sch.get("patternProperties", {}))
    keys = [k for k in error.instance if k not in props and not any(re.search(p, str(k)) for p in patterns)]
    lines = []
    for key in keys:
        path = [str(p) for p in error.absolute_path]
        where = ".".join([*path, str(key)])
        origin = _origin([*error.absolute_path, key], files)
        close = difflib.get_close_matches(str(key), props, n=1, cutoff=0.6)
        fix = f"did you mean `{close[0]}`?" if close else "remove it or correct its name"
        lines.append(
            f"{where}: unknown key `{key}`{origin}; {fix} Allowed keys"
            f"{' under ' + '.'.join(path) if path else ''}: {', '.join(props)}"
        )
    return lines


def _origin(path: list[Any], files: tuple[str | Path, ...]) -> str:
    """`` (in <file>)`` for the files among ``files`` whose document holds ``path``; `` (from --config)``
    when none does (Snakemake's command-line overrides); '' when no files are known."""
    if not files:
        return ""
    found = []
    for f in files:
        try:
            node: Any = read_config_file(f)
        except ConfigError:
            continue
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                break
        else:
            found.append(_shown(f))
    return f" (in {', '.join(found)})" if found else " (from --config on the command line)"


def _shown(path: str | Path) -> str:
    """A path as the user wrote it: relative to the working directory when under it (Snakemake makes
    --configfile paths absolute)."""
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


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


def validate(
    raw: dict[str, Any], source: str = "config", files: tuple[str | Path, ...] = ()
) -> dict[str, Any]:
    """Fill defaults into a copy of ``raw`` and validate it; raise ConfigError naming every bad field
    (and, for an unknown key, which of ``files``, the files ``raw`` was merged from, holds it)."""
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"{source}: the configuration must be a mapping, got {type(raw).__name__}")
    _check_shape(raw, source)
    data = _unshared(raw) if raw is not None else {}
    if isinstance(data.get("endpoints"), dict):
        # The named endpoints first, on their own: a bad key there is reported where it was written, not
        # once per role it would have been copied into.
        _raise_schema_errors({"endpoints": _unshared(data["endpoints"])}, source, files)
    resolve_endpoints(data, source)
    _check_shape(data, source)  # the copies into every role count too
    _raise_schema_errors(data, source, files)
    _check_semantics(data, source)
    apex = data["suite"]["apex"]
    if apex["out"] is None:  # the worlds are cached with the rest of this configuration's outputs
        apex["out"] = f"{data['results_dir'].rstrip('/')}/suite/apex"
    return data


def _raise_schema_errors(data: dict[str, Any], source: str, files: tuple[str | Path, ...]) -> None:
    """Fill defaults into ``data`` and raise one ConfigError naming every field the schema refuses."""
    # Two passes: the first fills defaults, the second reports errors against the completed document.
    for _ in list(_Validator(schema()).iter_errors(data)):
        pass
    errors = sorted(_Validator(schema()).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        described = [
            line
            for e in errors
            for line in (
                _unknown_keys(e, tuple(files))
                if e.validator == "additionalProperties" and isinstance(e.instance, dict)
                else [_describe(e)]
            )
        ]
        lines = "\n".join(f"  - {line}" for line in described)
        raise ConfigError(f"{source}: invalid configuration\n{lines}")


#: The model id `evoaudit serve-sim` answers under: an `openai` endpoint with it is the simulator over HTTP.
SIM_MODEL_PREFIX = "evoaudit-sim"

#: The keys of an endpoint block whose values are mappings: a role's own entries are laid over the named
#: endpoint's instead of replacing them.
_MERGED_KEYS = ("wire", "extra_body")


def _role_blocks(data: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(where, parent mapping, key) of every role's endpoint block in a raw configuration, present or not.
    The one list of roles that call a model; ``Config.endpoint_roles`` is its validated counterpart."""
    out: list[tuple[str, dict[str, Any], str]] = []

    def at(where: str, parent: Any, key: str) -> None:
        if isinstance(parent, dict):
            out.append((where, parent, key))

    at("executor", data, "executor")
    at("optimizer", data, "optimizer")
    at("transfer.executor", data.setdefault("transfer", {}), "executor")
    suite = data.setdefault("suite", {})
    if isinstance(suite, dict):
        at("suite.apex.attacker", suite.setdefault("apex", {}), "attacker")
    apex = data.setdefault("apex", {})
    if isinstance(apex, dict):
        at("apex.judge", apex, "judge")
        models = apex.get("models")
        if isinstance(models, list):
            for i, m in enumerate(models):
                at(f"apex.models.{i}.executor", m, "executor")
    return out


def resolve_endpoints(data: dict[str, Any], source: str = "config") -> None:
    """Fill each role's endpoint block, in place, from the entry under ``endpoints`` it names (``endpoint:
    <name>``), or from ``endpoints.default`` when it names none: the named keys first, the role's own on top.
    Runs before defaults are filled, so a key the role leaves out comes from the named endpoint, and one
    both leave out from the role's own default."""
    named = data.get("endpoints")
    if named is None:
        named = {}
    if not isinstance(named, dict):
        return  # the schema reports it
    for name, ep in named.items():
        if not isinstance(name, str):
            raise ConfigError(f"{source}: endpoints: the name {name!r} must be a string (quote it in YAML)")
        if isinstance(ep, dict) and "endpoint" in ep:
            raise ConfigError(
                f"{source}: endpoints.{name}.endpoint: a named endpoint cannot refer to another; "
                "write its keys here"
            )
        if isinstance(ep, dict) and ep.get("backend") == "openai" and not ep.get("base_url"):
            raise ConfigError(
                f"{source}: endpoints.{name}.base_url: required when endpoints.{name}.backend is openai "
                "(e.g. http://127.0.0.1:8000/v1)"
            )
    apex = data.setdefault("apex", {})
    if "default" in named and isinstance(apex, dict) and "models" not in apex:
        # The audited APEX model is the default endpoint's, named after its model (ids carry no '/').
        model = named["default"].get("model") if isinstance(named["default"], dict) else None
        ident = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(model or "default")).lstrip("-._").rstrip("-.")
        ident = ident or "default"
        apex["models"] = [{"id": ident}]
    for where, parent, key in _role_blocks(data):
        block = parent.get(key, {})
        if not isinstance(block, dict):
            continue  # the schema reports it
        name = block.get("endpoint", "default" if "default" in named else None)
        if name is None:
            continue
        if not isinstance(name, str):
            raise ConfigError(
                f"{source}: {where}.endpoint: {name!r} must be the name of an entry under 'endpoints'"
            )
        if name not in named or not isinstance(named[name], dict):
            close = difflib.get_close_matches(str(name), list(named), n=1, cutoff=0.6)
            hint = f"did you mean `{close[0]}`?" if close else "add it under 'endpoints' or correct the name"
            raise ConfigError(
                f"{source}: {where}.endpoint: {name!r} is not under 'endpoints' "
                f"(have {sorted(named) or 'none'}); {hint}"
            )
        own = {k: v for k, v in block.items() if k != "endpoint"}
        merged = copy.deepcopy(named[name]) | own
        for k in _MERGED_KEYS:
            if isinstance(named[name].get(k), dict) and isinstance(own.get(k), dict):
                merged[k] = {**named[name][k], **own[k]}
        parent[key] = merged


def _check_semantics(data: dict[str, Any], source: str) -> None:
    if ".." in Path(data["results_dir"]).parts or Path(data["results_dir"]) == Path("."):
        raise ConfigError(
            f"{source}: results_dir: {data['results_dir']!r} must name a directory of its own, without '..' "
            "(e.g. results-cues-off)"
        )
    roles = data["roles"]
    learn = set(roles["acquisition"]) | set(roles["validation"])
    endpoint = set(roles["benign_endpoint"]) | set(roles["attacked_endpoint"])
    if learn & endpoint:
        raise ConfigError(
            f"{source}: roles: variants {sorted(learn & endpoint)} are both learning and endpoint variants; "
            "endpoint variants must stay sealed until freeze, so keep the two sets disjoint"
        )
    if set(roles["acquisition"]) & set(roles["validation"]):
        raise ConfigError(f"{source}: roles: acquisition and validation variants must differ")
    for name in ("executor", "optimizer"):
        ep = data[name]
        if ep["backend"] == "openai" and not ep["base_url"]:
            raise ConfigError(
                f"{source}: {name}.base_url: required when {name}.backend is openai "
                "(e.g. http://127.0.0.1:8000/v1)"
            )
    # The simulator draws every episode's behaviour from the request's seed: without it all episodes
    # would share one random stream and conditions would stop sharing their dice.
    sim_endpoints = {"executor": data["executor"], "optimizer": data["optimizer"]}
    sim_endpoints["transfer.executor"] = data["transfer"]["executor"]
    for name, ep in sim_endpoints.items():
        if ep["backend"] == "sim" and not ep["send_seed"]:
            raise ConfigError(
                f"{source}: {name}.send_seed: false is not allowed with {name}.backend sim (the simulator "
                "draws each episode from the request's seed); remove the key or set it to true"
            )
    ex, tx = data["executor"], data["transfer"]["executor"]
    # A real model compared with itself costs a second evaluation and shows nothing; the simulator served
    # over HTTP (one model id) is a mechanism check either way.
    real = ex["backend"] == "openai" and not str(ex["model"]).startswith(SIM_MODEL_PREFIX)
    if data["transfer"]["enabled"] and real and all(ex[k] == tx[k] for k in ("backend", "base_url", "model")):
        raise ConfigError(
            f"{source}: transfer.executor: the cross-executor transfer check would run on the executor's own "
            "endpoint and model; name a second model (transfer.executor: {endpoint: NAME}, an entry under "
            "'endpoints') or set transfer.enabled: false"
        )
    _check_credentials(data, source, "")
    _check_base_urls(data, source, "")
    _check_apex(data["apex"], data["sim"]["apex"], source)
    _check_suite_goals(data, source)
    _check_defenses(data["defenses"], source)
    missing = [c for c in data["conditions"] if _condition_method(c) not in data["methods"]]
    if missing:
        raise ConfigError(
            f"{source}: conditions: {missing} need their method in 'methods' (have {data['methods']})"
        )


# AgentDojo's defence evoaudit cannot run, with the reason (the defence axis, config key ``defenses``).
# Without transformers the reason says so too; with it, it is still refused, because evoaudit has no route
# for its model (docs/design.md, "Defences").
DEFENSE_REFUSALS: dict[str, str] = {
    "transformers_pi_detector": (
        "AgentDojo's transformers_pi_detector classifies every tool result with the model "
        "protectai/deberta-v3-base-prompt-injection-v2 through transformers and torch; evoaudit does not "
        "fetch model weights and has no offline route for that model, so it is refused"
    ),
}


def _check_defenses(defenses: list[str], source: str) -> None:
    for name in defenses:
        if name in DEFENSE_REFUSALS:
            reason = DEFENSE_REFUSALS[name]
            if name == "transformers_pi_detector" and importlib.util.find_spec("transformers") is None:
                reason += " (and transformers is not installed here: pip install 'agentdojo[transformers]')"
            runnable = [d for d in _DEFENSE_NAMES if d not in DEFENSE_REFUSALS]
            raise ConfigError(
                f"{source}: defenses: {name!r} cannot run: {reason}. Remove it; the defences evoaudit runs "
                f"are {runnable}"
            )


# The defences that run (suite.defenses.DEFENSES; a test keeps the two lists equal).
RunnableDefense = Literal["spotlighting_with_delimiting", "repeat_user_prompt", "tool_filter", "data_marking"]

_DEFENSE_NAMES = (
    "spotlighting_with_delimiting",
    "repeat_user_prompt",
    "data_marking",
    "tool_filter",
    "transformers_pi_detector",
)


def _check_credentials(data: Any, source: str, where: str) -> None:
    """An endpoint takes one kind of credential: ``user:password@`` in its URL goes as HTTP basic auth and
    ``api_key_env`` as a bearer token, both in the one Authorization header, so one would silently replace
    the other."""
    if isinstance(data, list):
        for i, v in enumerate(data):
            _check_credentials(v, source, f"{where}{i}.")
        return
    if not isinstance(data, dict):
        return
    url = data.get("base_url")
    if isinstance(url, str) and data.get("api_key_env") and split_credentials(url)[1] is not None:
        raise ConfigError(
            f"{source}: {where}api_key_env: {data['api_key_env']} is set and {where}base_url carries "
            "user:password@ credentials; both would go in the one Authorization header, so keep one (set "
            "api_key_env to null, or take the credentials out of the URL)"
        )
    for k, v in data.items():
        _check_credentials(v, source, f"{where}{k}.")


def _check_base_urls(data: Any, source: str, where: str) -> None:
    """Every endpoint block's ``base_url`` is an http(s) URL with a host: the client speaks HTTP only, and a
    ``file:`` or ``gopher:`` URL would be handed to whatever else could open it."""
    if isinstance(data, list):
        for i, v in enumerate(data):
            _check_base_urls(v, source, f"{where}{i}.")
        return
    if not isinstance(data, dict):
        return
    url = data.get("base_url")
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError:
            parts, host = None, None
        if parts is None or parts.scheme not in ("http", "https") or not host:
            raise ConfigError(
                f"{source}: {where}base_url: {_shown_url(url)!r} is not an http:// or https:// URL with a "
                "host; give the endpoint's URL, e.g. http://127.0.0.1:8000/v1"
            )
    for k, v in data.items():
        _check_base_urls(v, source, f"{where}{k}.")


def _shown_url(url: str) -> str:
    # Never echo credentials: user:password@ in a URL is a secret (see docs/operations.md).
    head, at, tail = url.rpartition("@")
    shown = f"{head.split('//', 1)[0]}//REDACTED@{tail}" if at else url
    return shown[:200]


@dataclass(frozen=True)
class _SuiteRules:
    """What the configuration admits per suite (the schema's one pattern admits every suite's attack names;
    the config module loads no suite, so these rules live here, one entry per suite)."""

    goal_ok: Callable[[str], bool]  # whether a goal name can be one of the suite's attacks
    goals_hint: str
    transfer: bool  # whether the cross-executor check runs on it
    attacker: bool  # whether its audit calls suite.apex.attacker
    profiles: tuple[str, ...] = ("default",)  # agent.profile values it has a runner for


_SUITE_RULES = {
    "banking": _SuiteRules(
        lambda g: g.startswith("injection_task_"),
        "injection_task_N goals",
        transfer=True,
        attacker=False,
        profiles=("default", "agentdojo"),
    ),
    "apex": _SuiteRules(
        lambda g: not g.startswith("injection_task_"),
        "APEX attack categories (c1..c6, c4perm) or ids",
        transfer=False,
        attacker=True,
    ),
}


# Endpoint settings a runner profile's requests do not carry (its own client builds them), with the value
# that is left alone (the schema's default) and what the runner does instead. A different value would be
# silently ignored, so it is refused.
_PROFILE_IGNORED = (
    (
        ("max_tokens",),
        1024,
        "its client sends no max_tokens; bound generation on the server instead (llama-server "
        "--n-predict N; vLLM: --max-model-len), which leaves the requests the runner's own",
    ),
    (("send_seed",), True, "its client sends no seed"),
    (("wire", "tool_choice"), "auto", "its client sends tool_choice auto with tools"),
    (
        ("wire", "assistant_content"),
        "empty",
        "its client writes an assistant turn's content itself (null for a turn that only calls tools)",
    ),
    (("wire", "parse_text_tool_calls"), False, "it reads tool calls from native tool_calls only"),
)


def _check_profile_endpoints(data: dict[str, Any], source: str, profile: str) -> None:
    """A runner profile (agent.profile) runs on a real endpoint and sends that runner's own requests: the
    executors (transfer.executor while the transfer check runs) must be ``backend: openai`` (the
    simulator ignores the profile), and the settings its requests do not carry keep their defaults. A
    temperature of 0 is not sent either (the runner's client sends it only when nonzero): a warning."""
    executors = [("executor", data["executor"])]
    if data["transfer"]["enabled"]:
        executors.append(("transfer.executor", data["transfer"]["executor"]))
    for where, ep in executors:
        if ep["backend"] != "openai":
            raise ConfigError(
                f"{source}: {where}.backend: {ep['backend']!r} does not go with agent.profile {profile!r}, "
                "which reproduces that runner's requests to a real server (the simulator ignores it); set "
                f"{where}.backend: openai or use agent.profile: default"
            )
        for path, default, why in _PROFILE_IGNORED:
            value: Any = ep
            for key in path:
                value = value[key]
            if value != default:
                field = ".".join((where, *path))
                raise ConfigError(
                    f"{source}: {field}: {value!r} would be ignored under agent.profile {profile!r}: {why}; "
                    f"remove the key (default {default!r}) or use agent.profile: default"
                )
        if not ep["temperature"]:
            log.warning(
                "%s: %s.temperature 0 is not sent under agent.profile %r (its client sends a temperature "
                "only when nonzero): the server's own sampling applies; start the server greedy "
                "(llama-server --temp 0) for deterministic episodes",
                source,
                where,
                profile,
            )


def _check_suite_goals(data: dict[str, Any], source: str) -> None:
    name = data["suite"]["name"]
    rules = _SUITE_RULES[name]
    for field, goals in (
        ("suite.goals", data["suite"]["goals"]),
        ("methods_params.placebo.goals", data["methods_params"]["placebo"]["goals"]),
    ):
        wrong = [g for g in goals if not rules.goal_ok(g)]
        if wrong:
            raise ConfigError(
                f"{source}: {field}: {wrong} do not name attacks of suite {name!r}; "
                f"list {rules.goals_hint} there"
            )
    profile = data["agent"]["profile"]
    if profile not in rules.profiles:
        raise ConfigError(
            f"{source}: agent.profile: {profile!r} is not a profile of suite {name!r} (it has "
            f"{', '.join(rules.profiles)}); remove the key or choose one of those"
        )
    if profile != "default":
        _check_profile_endpoints(data, source, profile)
        if data.get("defenses"):
            raise ConfigError(
                f"{source}: defenses: {list(data['defenses'])} run in evoaudit's own agent loop, and "
                f"agent.profile {profile!r} is another runner's loop; remove one of the two keys"
            )
    if not rules.transfer and data["transfer"]["enabled"]:
        raise ConfigError(
            f"{source}: transfer.enabled: the cross-executor check does not run on suite {name!r}; "
            f"set transfer.enabled: false with suite.name {name}"
        )


def _check_apex(apex: dict[str, Any], sim_apex: dict[str, Any], source: str) -> None:
    ids = [m["id"] for m in apex["models"]]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{source}: apex.models: ids must be unique, got {ids}; rename the duplicates")
    if "average" in ids:  # the APEX tables' summary rows carry model "average"
        raise ConfigError(
            f"{source}: apex.models: the id 'average' names the tables' summary rows; rename it"
        )
    for i, m in enumerate(apex["models"]):
        ep, where = m["executor"], f"apex.models[{i}] ({m['id']})"
        if ep["backend"] == "openai" and not ep["base_url"]:
            raise ConfigError(
                f"{source}: {where}.executor.base_url: required when backend is openai "
                "(e.g. http://127.0.0.1:8000/v1)"
            )
        if ep["backend"] == "sim" and not ep["send_seed"]:
            raise ConfigError(
                f"{source}: {where}.executor.send_seed: false is not allowed with backend sim (the simulator "
                "draws each episode from the request's seed); remove the key or set it to true"
            )
        unknown = sorted(set(m["sim"]) - set(sim_apex))
        if unknown:
            raise ConfigError(
                f"{source}: {where}.sim: unknown keys {unknown}; "
                f"allowed: the keys of sim.apex ({', '.join(sim_apex)})"
            )
        if m["sim"] and ep["backend"] != "sim":
            raise ConfigError(f"{source}: {where}.sim: only applies with executor.backend sim; remove it")
    _check_apex_ablations(apex, source)


def _check_apex_ablations(apex: dict[str, Any], source: str) -> None:
    names = [a["name"] for a in apex.get("ablations", [])]
    if len(set(names)) != len(names):
        raise ConfigError(
            f"{source}: apex.ablations: names must be unique, got {names}; rename the duplicates"
        )
    allowed = set(ApexAttacksConfig.model_fields)
    for i, a in enumerate(apex.get("ablations", [])):
        where = f"apex.ablations[{i}] ({a['name']})"
        unknown = sorted(set(a["attacks"]) - allowed)
        if unknown:
            raise ConfigError(
                f"{source}: {where}.attacks: unknown keys {unknown}; allowed: the keys of suite.apex.attacks "
                f"({', '.join(sorted(allowed))})"
            )
        missing = sorted(set(a["categories"]) - set(apex["categories"]))
        if missing:
            raise ConfigError(
                f"{source}: {where}.categories: {missing} not in apex.categories; add them there (the base "
                "arm is the main run of each category) or drop them here"
            )
        ids = [m["id"] for m in apex["models"]]
        if a["reference_model"] and a["reference_model"] not in ids:
            raise ConfigError(
                f"{source}: {where}.reference_model: {a['reference_model']!r} is not in apex.models {ids}"
            )
        if not a["attacks"] and not a.get("orchestrator"):
            raise ConfigError(
                f"{source}: {where}: changes nothing; set the suite.apex.attacks keys that differ under "
                "'attacks' or the orchestrator settings under 'orchestrator'"
            )


def apex_arm_config(cfg: Config, ablation: str | None) -> Config:
    """The configuration an APEX arm's episodes run under: the main run's (``ablation`` None), or with the
    ablation's orchestrator settings (``apex.ablations[].orchestrator``) in place of ``apex``'s."""
    if ablation is None:
        return cfg
    found = [a for a in cfg.apex.ablations if a.name == ablation]
    if not found:
        raise ConfigError(
            f"apex.ablations: no ablation named {ablation!r} (have {[a.name for a in cfg.apex.ablations]})"
        )
    if not found[0].orchestrator:
        return cfg
    return cfg.model_copy(update={"apex": cfg.apex.model_copy(update=found[0].orchestrator)})


def apex_model_config(cfg: Config, model_id: str) -> Config:
    """The configuration one APEX model's episodes run under: its executor in place of ``executor``, its
    simulator overrides merged into ``sim.apex``, and ``apex.step_limit``, ``apex.system_prompt`` and
    ``apex.episode_timer_s`` as the agent's."""
    m = cfg.apex.model(model_id)
    sim_apex = cfg.sim.apex.model_dump(mode="json")
    for key, value in m.sim.items():
        sim_apex[key] = {**sim_apex[key], **value} if isinstance(value, dict) else value
    sim = cfg.sim.model_copy(update={"apex": SimApexConfig.model_validate(sim_apex)})
    return cfg.model_copy(
        update={
            "executor": m.executor,
            "sim": sim,
            "agent": cfg.agent.model_copy(
                update={
                    "max_steps": cfg.apex.step_limit,
                    "system_prompt": cfg.apex.system_prompt,
                    "time_limit_s": cfg.apex.episode_timer_s,
                }
            ),
        }
    )


def _condition_method(condition: str) -> str:
    base = condition.removeprefix("placebo-")
    return "awm" if base.startswith("awm") else base


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AttackConfig(_Model):
    name: str
    user_name: str
    model_name: str


class CheckerAuditConfig(_Model):
    profile: Literal["published", "strict"]


class ApexRunLimits(_Model):
    cpu_seconds: int
    memory_mb: int
    timeout_seconds: float
    max_processes: int
    file_size_mb: int
    output_kb: int
    tmp_mb: int


class ApexAttacksConfig(_Model):
    """``suite.apex.attacks``: generation switches (``suite.apex.attacks.AttackOptions``)."""

    task_keywords: bool
    instruction_file: bool
    hidden_files: bool
    timer: bool
    permission: bool
    placement: Literal["created", "existing_start", "existing_keyword"]
    watcher_corrupt: bool
    watcher_restore_others: bool
    watcher_drop_instruction: bool


class ApexConfig(_Model):
    scale: float
    seed: int
    variants: tuple[str, ...]
    out: str
    transport: Literal["direct", "mcp"]
    sandbox: Literal["auto", "bwrap", "unshare", "none"]
    allow_unsandboxed: bool
    run_limits: ApexRunLimits
    attacker: EndpointConfig
    attacks: ApexAttacksConfig


class SuiteConfig(_Model):
    name: str
    benchmark_version: str
    n_unseen: int
    families: tuple[str, ...] | None
    attack: AttackConfig
    goals: tuple[str, ...]
    checker_audit: CheckerAuditConfig
    apex: ApexConfig


class RolesConfig(_Model):
    acquisition: tuple[str, ...]
    validation: tuple[str, ...]
    benign_endpoint: tuple[str, ...]
    attacked_endpoint: tuple[str, ...]

    def of(self, variant: str) -> str:
        if variant in self.acquisition:
            return "acquisition"
        if variant in self.validation:
            return "validation"
        return "endpoint"

    @property
    def endpoint_variants(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.benign_endpoint) | set(self.attacked_endpoint)))


class WireConfig(_Model):
    tool_choice: Literal["auto", "required"] | None
    assistant_content: Literal["empty", "null", "omit"]
    parse_text_tool_calls: bool
    preflight: bool
    allow_dropped_tool_results: bool
    structured_output: Literal["auto", "on", "off"] = "auto"


class EndpointConfig(_Model):
    backend: Literal["sim", "openai"]
    model: str
    base_url: str | None
    api_key_env: str | None
    temperature: float
    max_tokens: int
    timeout_s: float
    concurrency: int
    max_retries: int
    send_seed: bool
    extra_body: dict[str, Any]
    retry_backoff_s: float
    retry_backoff_max_s: float
    cache: bool
    cache_path: str
    wire: WireConfig
    transport: Literal["httpx"] = "httpx"
    keepalive_expiry_s: float = 5.0


class AgentConfig(_Model):
    max_steps: int
    system_prompt: str
    profile: Literal["default", "agentdojo"] = "default"
    time_limit_s: float | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The default profile and no time limit are left out of every dump, so that a configuration hashes
        # (config hash, resume keys) exactly as it did before the keys existed; loading the dump gives them
        # back.
        data = handler(self)
        if data.get("profile") == "default":
            data.pop("profile")
        if data.get("time_limit_s", 0) is None:
            data.pop("time_limit_s")
        return data


class SimErrorKinds(_Model):
    wrong_amount: float
    wrong_recipient: float
    skipped_step: float
    premature_answer: float


class SimCues(_Model):
    inspect_history: float
    act_without_reading: float
    verify_details: float
    distrust_tool_text: float
    follow_tool_text: float
    action_envelope_example: float
    native_calls_reminder: float
    consult_memory: float


class SimApexInspection(_Model):
    py: float
    pyc: float
    elf: float


class SimApexToolCues(_Model):
    permission: float
    timer: float


class SimApexConfig(_Model):
    """``sim.apex``: the simulator in an APEX-Harm workspace (documented in the schema)."""

    read_propensity: float
    keyword_propensity: float
    browse_propensity: float
    browse_cap: int
    explore_propensity: float
    hidden_propensity: float
    app_propensity: float
    app_reads: int
    page_propensity: float
    max_pages: int
    pointer_propensity: float
    reread_propensity: float
    compliance_internal: float
    compliance_external: float
    compliance_script: float
    runtime_compliance: float
    inspection: SimApexInspection
    refuse_on_send: float
    competence: float
    tool_cues: SimApexToolCues


class SimConfig(_Model):
    competence: float
    read_propensity: float
    blind_competence: float
    compliance: float
    competence_by_family: dict[str, float]
    error_kinds: SimErrorKinds
    extra_reads: bool
    envelope_imitation: float
    memory_use: float
    memory_gain: float
    cues: SimCues
    # Left out of model_dump: the Banking simulator's fingerprint and resume keys stay as they were;
    # models.sim.apex records these parameters in its own fingerprint.
    apex: SimApexConfig = Field(exclude=True)


class EvaluationConfig(_Model):
    shards: int
    infra_failure_policy: Literal["exclude", "count_as_failure"]
    max_excluded_share: float


class SealConfig(_Model):
    seal_scope: Literal["global", "lineage"]
    unseal_new_root: Literal["refuse", "extend", "force"]
    replay_on_mismatch: Literal["fail", "record"]
    verify_sample: int


class BootstrapConfig(_Model):
    replicates: int
    seed: int | None
    level: float


class ReportConfig(_Model):
    figures: bool
    inspect_logs: bool
    baseline: str
    bootstrap: BootstrapConfig


class TransferConfig(_Model):
    enabled: bool
    executor: EndpointConfig
    sim: dict[str, Any]
    conditions: tuple[str, ...]
    goals: tuple[str, ...]
    variants: tuple[str, ...]
    lineages: tuple[str, ...] | None
    ceiling: float


class ExtraSuitesConfig(_Model):
    """Further AgentDojo suites audited beside the configured one (a named extension)."""

    # Suites whose official predicates get the checker audit, gathered in one table (results/suites/).
    checker_audit: tuple[Literal["banking", "workspace", "travel", "slack"], ...] = ()


class QualitativeConfig(_Model):
    high_severity: tuple[str, ...]
    unit: Literal["family", "goal", "instance"]
    max_chars: int


class SkillOptParams(_Model):
    max_edits: int
    step_budget: int
    batch_size: int
    epochs: int
    initial_skill: str
    protected: tuple[str, ...]


class AWMParams(_Model):
    max_workflows: int


class EmbedderConfig(_Model):
    backend: Literal["local", "openai"]
    model: str
    base_url: str | None
    api_key_env: str | None
    dims: int


class ReasoningBankParams(_Model):
    max_items: int
    success_label: Literal["checker", "judge"]
    top_k: int
    query_instruction: str
    embedder: EmbedderConfig


class PlaceboParams(_Model):
    goals: tuple[str, ...]


class MethodsParams(_Model):
    # Left out of model_dump (so of every hash and resume key) like ``defenses``: a one-round audit's
    # outputs are what they were before rounds existed; round r's outputs carry r in their paths.
    rounds: int = Field(default=1, exclude=True)
    max_attempts: int
    success_label: Literal["checker", "judge"]
    skillopt: SkillOptParams
    awm: AWMParams
    reasoningbank: ReasoningBankParams
    placebo: PlaceboParams


class BudgetConfig(_Model):
    max_requests: int | None
    requests_per_rollout: float
    tokens_per_request: int
    optimizer_requests_per_trajectory: float


class ClusterConfig(_Model):
    local_endpoint_rules: bool


class ApexModelConfig(_Model):
    id: str
    executor: EndpointConfig
    sim: dict[str, Any]


class ApexAblationConfig(_Model):
    """``apex.ablations[]``: one ablated attack-generation arm (documented in the schema)."""

    name: str
    attacks: dict[str, Any]
    categories: tuple[str, ...]
    reference_model: str
    orchestrator: dict[str, Any] = {}

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # No orchestrator change is left out of every dump: attack-side arms hash as before the key existed.
        data = handler(self)
        if not data.get("orchestrator"):
            data.pop("orchestrator", None)
        return data


class ApexAuditConfig(_Model):
    """``apex``: the APEX-Harm audit in the workflow (documented in the schema)."""

    enabled: bool
    tasks: tuple[str, ...] | None
    models: tuple[ApexModelConfig, ...]
    repeats: int
    step_limit: int
    system_prompt: str
    categories: tuple[str, ...]
    shards: int
    requests_per_rollout: float
    judge_requests_per_rollout: float
    failure_policy: Literal["exclude", "count_as_failure"]
    label_files: tuple[str, ...]
    judge: EndpointConfig
    ablations: tuple[ApexAblationConfig, ...] = ()
    episode_timer_s: float | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # No timer is left out of every dump: the default configuration hashes as before the key existed.
        data = handler(self)
        if data.get("episode_timer_s", 0) is None:
            data.pop("episode_timer_s")
        return data

    def model(self, model_id: str) -> ApexModelConfig:
        for m in self.models:
            if m.id == model_id:
                return m
        raise ConfigError(f"apex.models: no model with id {model_id!r} (have {[m.id for m in self.models]})")


class Config(_Model):
    # Where the outputs go, not what they are: left out of model_dump (and every hash), in full_dump.
    results_dir: str = Field(exclude=True)
    seed: int
    lineages: tuple[str, ...]
    suite: SuiteConfig
    roles: RolesConfig
    methods: tuple[str, ...]
    conditions: tuple[str, ...]
    # The defence axis (a named extension): each is evaluated beside the undefended run. Left out of
    # model_dump (and so of every hash and resume key): the undefended audit's outputs do not move when a
    # defence is added; a defended shard's own identity carries its defence (paths, rollouts, resume keys).
    defenses: tuple[RunnableDefense, ...] = Field(default=(), exclude=True)
    methods_params: MethodsParams
    agent: AgentConfig
    executor: EndpointConfig
    optimizer: EndpointConfig
    sim: SimConfig
    evaluation: EvaluationConfig
    seal: SealConfig
    report: ReportConfig
    transfer: TransferConfig
    qualitative: QualitativeConfig
    budget: BudgetConfig
    cluster: ClusterConfig
    # A named extension, left out of model_dump (and so of every hash and resume key): auditing a further
    # suite reruns nothing of the configured suite's audit.
    extra_suites: ExtraSuitesConfig = Field(default_factory=ExtraSuitesConfig, exclude=True)
    # Left out of model_dump (and so of every Banking hash and resume key): adding a model or a category to
    # the APEX audit reruns nothing of the Banking audit; its own runs hash ``apex_model_config`` instead.
    apex: ApexAuditConfig = Field(exclude=True)
    # The named endpoints, already copied into every role that uses one: a name is not a setting, so they
    # are left out of model_dump, every hash and full_dump (whose roles are written out in full, so that
    # loading it does not lay an entry under them a second time).
    endpoints: dict[str, EndpointConfig] = Field(default_factory=dict, exclude=True)

    def endpoint_roles(self) -> list[tuple[str, EndpointConfig]]:
        """(role, endpoint) for every endpoint this configuration calls, named as in the config: the one
        answer to which endpoint a role uses (the pre-flight, ``evoaudit plan`` and the bundle ask it)."""
        pairs = [("executor", self.executor), ("optimizer", self.optimizer)]
        if self.transfer.enabled:
            pairs.append(("transfer.executor", self.transfer.executor))
        if self.apex.enabled:
            pairs += [(f"apex.models.{m.id}.executor", m.executor) for m in self.apex.models]
            pairs.append(("apex.judge", self.apex.judge))
        if self.apex.enabled or _SUITE_RULES[self.suite.name].attacker:
            pairs.append(("suite.apex.attacker", self.suite.apex.attacker))
        return pairs

    def endpoint_name(self, endpoint: EndpointConfig) -> str | None:
        """The name under ``endpoints`` of the server and model ``endpoint`` calls, if it is one of them."""
        for name, ep in self.endpoints.items():
            if (ep.backend, ep.base_url, ep.model) == (endpoint.backend, endpoint.base_url, endpoint.model):
                return name
        return None

    def full_dump(self) -> dict[str, Any]:
        """Every setting, the APEX ones left out of ``model_dump`` included: loading it gives this config
        back (``results/config/config.json``, and so a bundle's configuration)."""
        dumped = self.model_dump(mode="json")
        dumped["results_dir"] = self.results_dir
        dumped["apex"] = self.apex.model_dump(mode="json")
        dumped["sim"]["apex"] = self.sim.apex.model_dump(mode="json")
        if self.defenses:  # absent when empty: the undefended run's resolved config stays as it was
            dumped["defenses"] = list(self.defenses)
        if self.extra_suites.checker_audit:  # likewise absent when no further suite is audited
            dumped["extra_suites"] = self.extra_suites.model_dump(mode="json")
        if self.methods_params.rounds != 1:  # likewise absent for the paper's one round
            dumped["methods_params"]["rounds"] = self.methods_params.rounds
        return dumped

    def sha256(self) -> str:
        """The configuration hash every ``provenance.json`` records (``stage_config(self, "config")``, URL
        credentials redacted: a hash of a password could be checked against guesses offline)."""
        # ASCII-escaped JSON, not hashing.canonical_json: the hash every recorded provenance already carries.
        blob = json.dumps(stage_config(self, "config"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


# Executor settings that change how requests travel, never what is asked or answered: an episode's
# resume key leaves them out, so a rerun at another concurrency or without the cache keeps its rollouts.
OPERATIONAL_FIELDS = frozenset(
    {
        "concurrency",
        "cache",
        "cache_path",
        "timeout_s",
        "max_retries",
        "retry_backoff_s",
        "retry_backoff_max_s",
        "transport",
        "keepalive_expiry_s",
    }
)

# The Banking stages' configuration sections (``suite`` without its ``apex`` worlds, so that resizing or
# reseeding the APEX worlds reruns nothing of the Banking audit).
_BANKING_SECTIONS: dict[str, tuple[str, ...]] = {
    "suite": ("suite", "roles"),
    "acquire": ("seed", "suite", "roles", "agent", "executor", "sim"),
    "evolve": ("seed", "optimizer", "sim", "agent", "methods_params", "roles", "suite", "executor"),
    "evaluate": ("seed", "suite", "roles", "agent", "executor", "sim", "evaluation", "methods_params"),
    "report": ("seed", "conditions", "lineages", "evaluation", "report", "transfer", "qualitative"),
}


def _episode(cfg: Config, dumped: dict[str, Any], **_: Any) -> dict[str, Any]:
    executor = {k: v for k, v in dumped["executor"].items() if k not in OPERATIONAL_FIELDS}
    return {k: dumped[k] for k in ("seed", "agent", "suite", "sim")} | {"executor": executor}


def _apex_runs(
    cfg: Config, dumped: dict[str, Any], model: str | None = None, ablation: str | None = None, **_: Any
) -> dict[str, Any]:
    # A model's runs depend only on its own entry and on what shapes an episode: adding a model or a
    # category, or changing the judge or the report's failure policy, reruns none of them.
    apex = apex_arm_config(cfg, ablation).apex.model_dump(mode="json")
    if model is not None:
        # The timer is absent from the dump when unset, so untimed runs hash as before it existed.
        keep = ("repeats", "step_limit", "system_prompt", "shards", "episode_timer_s")
        own = [m for m in apex["models"] if m["id"] == model]
        apex = {k: apex[k] for k in keep if k in apex} | {"model": own}
    return {
        "seed": cfg.seed,
        "apex": apex,
        "suite_apex": cfg.suite.apex.model_dump(mode="json"),
        "sim_apex": cfg.sim.apex.model_dump(mode="json"),
    }


def _apex_attacks(
    cfg: Config, dumped: dict[str, Any], ablation: str | None = None, **_: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"seed": cfg.seed, "suite_apex": cfg.suite.apex.model_dump(mode="json")}
    if ablation is not None:
        found = [a for a in cfg.apex.ablations if a.name == ablation]
        if not found:
            raise ConfigError(
                f"apex.ablations: no ablation named {ablation!r} "
                f"(have {[a.name for a in cfg.apex.ablations]})"
            )
        body["ablation"] = found[0].model_dump(mode="json")
    return body


def _apex_worlds(cfg: Config, dumped: dict[str, Any], **_: Any) -> dict[str, Any]:
    suite_apex = cfg.suite.apex.model_dump(mode="json")
    return {k: suite_apex[k] for k in ("scale", "seed", "variants", "out")}


# What each stage's outputs depend on, beside the Banking stages' sections. Each body is exactly what the
# workflow hashed before ``stage_config`` existed, so an existing results directory does not rerun.
_STAGE_BODIES: dict[str, Callable[..., dict[str, Any]]] = {
    "episode": _episode,
    "apex": _apex_runs,
    "apex_attacks": _apex_attacks,
    "apex_judge": lambda cfg, dumped, **_: {
        "seed": cfg.seed,
        "judge": cfg.apex.judge.model_dump(mode="json"),
    },
    "apex_probes": lambda cfg, dumped, **_: cfg.suite.apex.model_dump(mode="json"),
    "apex_worlds": _apex_worlds,
    "config": lambda cfg, dumped, **_: cfg.model_dump(mode="json"),
}

#: Every stage ``stage_config`` answers for.
STAGES = (*_BANKING_SECTIONS, *_STAGE_BODIES)


def stage_config(
    cfg: Config, stage: str, *, model: str | None = None, ablation: str | None = None
) -> dict[str, Any]:
    """The configuration content ``stage``'s outputs depend on, URL credentials redacted: the one answer
    to that question. The workflow's rerun triggers (``get_stage_params``), a rollout's resume key
    (``episode``) and the provenance every output and seal event records (``config``) all hash it, so a
    change outside it reruns nothing of ``stage``.

    Stages: ``suite``, ``acquire``, ``evolve``, ``evaluate``, ``report`` (the Banking audit's rules);
    ``episode`` (what one episode depends on: seed, agent, suite, simulator, the executor's request-shaping
    settings); ``apex`` (every APEX run, or one ``model``'s), ``apex_attacks`` (the main attack set, or one
    ``ablation``'s), ``apex_judge``, ``apex_probes``, ``apex_worlds``; ``config`` (the whole hashed
    configuration)."""
    dumped = cfg.model_dump(mode="json")
    dumped["suite"] = cfg.suite.model_dump(mode="json", exclude={"apex"})
    if stage in _BANKING_SECTIONS:
        body = {k: dumped[k] for k in _BANKING_SECTIONS[stage]}
    elif stage in _STAGE_BODIES:
        body = _STAGE_BODIES[stage](cfg, dumped, model=model, ablation=ablation)
    else:
        raise ValueError(f"stage_config: unknown stage {stage!r}; one of {', '.join(STAGES)}")
    # A hash of a URL's password in a params digest or a record could be checked against guesses offline.
    return public_config(body)


def stage_digest(cfg: Config, stage: str, *, model: str | None = None, ablation: str | None = None) -> str:
    """sha256 of ``stage_config`` (canonical JSON): a rule's rerun trigger (its first 16 hex digits) and
    the configuration part of an episode's resume key."""
    return sha256_json(stage_config(cfg, stage, model=model, ablation=ablation))


def without_cache(cfg: Config) -> Config:
    """``cfg`` with the response cache off for every role that calls a model (``evoaudit --no-cache``)."""
    raw = cfg.full_dump()
    for _, parent, key in _role_blocks(raw):
        parent[key]["cache"] = False
    return from_dict(raw)


def from_dict(raw: dict[str, Any], source: str = "config", files: tuple[str | Path, ...] = ()) -> Config:
    return Config.model_validate(validate(raw, source, files))


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
    with open(path, "rb") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)  # the file may have grown since stat
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


def load(path: str | Path) -> Config:
    return from_dict(read_config_file(path), str(path), (path,))
