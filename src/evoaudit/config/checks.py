"""Validation of a configuration document: the JSON schema generated from the models (defaults filled in),
the named endpoints copied into every role, and the semantic checks the schema cannot express (methods
and conditions, defences, credentials and URLs, each suite's goals and profiles, APEX-Harm's settings)."""

from __future__ import annotations

import copy
import difflib
import functools
import importlib.util
import logging
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import yaml
from pydantic import (
    ValidationError,
)

from evoaudit import method_plugins
from evoaudit.config.errors import ConfigError
from evoaudit.config.limits import _check_shape, _unshared, read_config_file
from evoaudit.config.model import _DEFENSE_NAMES, ApexAttacksConfig, Config, EndpointConfig, SimApexConfig
from evoaudit.config.suites import _SUITE_RULES
from evoaudit.credentials import split_credentials
from evoaudit.paths import Layout

log = logging.getLogger(__name__)


# libyaml's safe loader where PyYAML has it: the same data as the pure-Python loader, which spent about
# 0.2 s of CPU on the 120 kB schema in every job that validates its configuration.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def schema() -> dict[str, Any]:
    """The configuration's JSON schema, as generated from the models (``evoaudit.config_schema``)."""
    text = resources.files("evoaudit").joinpath("config.schema.yaml").read_text()
    return yaml.load(text, Loader=_SAFE_LOADER)


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
        apex["out"] = Layout.at(data["results_dir"]).worlds
    rules = _SUITE_RULES[data["suite"]["name"]]
    poisoning = data["poisoning"]
    if poisoning["goals"] and poisoning["attack"] is None:  # the suite's own placement of its goals
        poisoning["attack"] = rules.poison_attack
    if data["agent"]["system_prompt"] is None:  # the suite's own briefing
        data["agent"]["system_prompt"] = rules.agent_prompt or data["apex"]["system_prompt"]
    skillopt = data["methods_params"]["skillopt"]
    if skillopt["initial_skill"] is None:
        skillopt["initial_skill"] = rules.skill_seed
    if skillopt["protected"] is None:  # the skill's title: its first Markdown heading, if it has one
        headings = [line for line in skillopt["initial_skill"].splitlines() if line.startswith("# ")]
        skillopt["protected"] = headings[:1]
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
    _check_external_agent(data, source)
    _check_defenses(data["defenses"], source)
    _check_write_defenses(data, source)
    _check_methods(data, source)
    missing = [c for c in data["conditions"] if method_plugins.method_of(c) not in data["methods"]]
    if missing:
        raise ConfigError(
            f"{source}: conditions: {missing} need their method in 'methods' (have {data['methods']})"
        )


def _check_write_defenses(data: dict[str, Any], source: str) -> None:
    """Every write-screen pattern compiles; write screens cover the first round's acquisition only."""
    wd = data.get("write_defenses") or {}
    for i, p in enumerate((wd.get("instruction_rules") or {}).get("patterns") or ()):
        try:
            re.compile(p["regex"])
        except re.error as exc:
            raise ConfigError(
                f"{source}: write_defenses.instruction_rules.patterns[{i}] ({p['name']}): not a regular "
                f"expression ({exc}); fix the regex"
            ) from None
    if wd.get("screens") and data["methods_params"].get("rounds", 1) > 1:
        raise ConfigError(
            f"{source}: write_defenses.screens: write screens filter the first round's acquisition record "
            "only; a later round (methods_params.rounds > 1) would learn from an unscreened one. Set "
            "methods_params.rounds: 1 or remove the screens"
        )


def _check_methods(data: dict[str, Any], source: str) -> None:
    """Every method and condition names an installed method (``evoaudit.method_plugins``), by name alone:
    no method's code is imported here (a condition's insertion is checked by ``methods.conditions
    .check_conditions`` when the workflow or a command starts)."""
    for field in ("methods", "conditions"):
        for name in data[field]:
            try:
                if field == "methods":
                    if not method_plugins.is_method(name):
                        raise method_plugins.MethodPluginError(method_plugins.unknown(name))
                else:
                    method_plugins.check_condition(name, load_method=False)
            except method_plugins.MethodPluginError as exc:
                raise ConfigError(f"{source}: {field}: {exc}") from None


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


# Endpoint settings a runner profile's requests do not carry (its own client builds them), with what the
# runner does instead. A value other than EndpointConfig's default would be silently ignored, so it is
# refused.
_PROFILE_IGNORED = (
    (
        ("max_tokens",),
        "its client sends no max_tokens; bound generation on the server instead (llama-server "
        "--n-predict N; vLLM: --max-model-len), which leaves the requests the runner's own",
    ),
    (("send_seed",), "its client sends no seed"),
    (("wire", "tool_choice"), "its client sends tool_choice auto with tools"),
    (
        ("wire", "assistant_content"),
        "its client writes an assistant turn's content itself (null for a turn that only calls tools)",
    ),
    (("wire", "parse_text_tool_calls"), "it reads tool calls from native tool_calls only"),
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
        for path, why in _PROFILE_IGNORED:
            value: Any = ep
            default: Any = EndpointConfig()
            for key in path:
                value, default = value[key], getattr(default, key)
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
    attack = data["poisoning"]["attack"]
    if data["poisoning"]["goals"] and attack is not None and attack != rules.poison_attack:
        raise ConfigError(
            f"{source}: poisoning.attack: {attack!r} does not place persistence goals in suite {name!r}; "
            + (f"use {rules.poison_attack} or leave it out" if rules.poison_attack else "remove it")
        )
    foreign = [g for g in data["poisoning"]["goals"] if g not in rules.poison_goals]
    if foreign:
        own = ", ".join(rules.poison_goals)
        fix = (
            f"its goals: {own}"
            if own
            else "the poisoning extension does not run on it; remove poisoning.goals"
        )
        raise ConfigError(
            f"{source}: poisoning.goals: {foreign} are not persistence goals of suite {name!r}; {fix}"
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


def _check_external_agent(data: dict[str, Any], source: str) -> None:
    """agent.external replaces evoaudit's own loop, so nothing that lives in that loop may be asked for."""
    if not data["agent"]["external"]["command"]:
        return
    name = data["suite"]["name"]
    clashes = {
        "agent.profile": (data["agent"]["profile"] != "default", "remove the key"),
        "defenses": (bool(data.get("defenses")), "remove the key"),
        "transfer.enabled": (data["transfer"]["enabled"], "set it to false"),
        "apex.enabled": (data["apex"]["enabled"], "set it to false"),
        "suite.name": (not _SUITE_RULES[name].served, "serve an AgentDojo suite"),
    }
    for field, (bad, fix) in clashes.items():
        if bad:
            raise ConfigError(
                f"{source}: {field}: does not go with agent.external (your own agent replaces evoaudit's "
                f"loop); {fix}, or remove agent.external"
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
        _check_apex_sim_values(m["sim"], sim_apex, source, where)
    _check_apex_ablations(apex, source)


def _check_apex_sim_values(over: dict[str, Any], sim_apex: dict[str, Any], source: str, where: str) -> None:
    """A model's ``sim`` overrides, merged as ``apex_model_config`` merges them, hold values ``sim.apex``
    admits (the schema sees only a mapping there; the model's constraints are the schema's own)."""
    merged = {
        k: {**v, **over[k]} if isinstance(v, dict) and isinstance(over.get(k), dict) else over.get(k, v)
        for k, v in sim_apex.items()
    }
    try:
        SimApexConfig.model_validate(merged)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(map(str, err["loc"]))
        raise ConfigError(
            f"{source}: {where}.sim.{field}: {err['msg']} (got {err.get('input')!r}); give a value that "
            f"sim.apex.{field} admits"
        ) from exc


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
        orch = a.get("orchestrator") or {}
        for key, value in orch.items():
            if key != "episode_timer_s":
                raise ConfigError(
                    f"{source}: {where}.orchestrator.{key}: not an orchestrator setting; the one that can "
                    "differ in an arm is episode_timer_s"
                )
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if value is not None and (not number or value <= 0):
                raise ConfigError(
                    f"{source}: {where}.orchestrator.episode_timer_s: {value!r} is not a number of seconds "
                    "above 0; give one, or null for no timer in this arm"
                )
        if a["attacks"] and orch:
            # The orchestrator table pairs the arms on the same attack set; another set breaks the pairing.
            raise ConfigError(
                f"{source}: {where}: sets both 'attacks' and 'orchestrator'; an arm changes one or the other "
                "(split it into two ablations)"
            )
        if orch and all(apex.get(k) == v for k, v in orch.items()):
            raise ConfigError(
                f"{source}: {where}.orchestrator: {orch} is what apex already sets, so the arm changes "
                "nothing; give a different value or remove the ablation"
            )
        if not a["attacks"] and not orch:
            raise ConfigError(
                f"{source}: {where}: changes nothing; set the suite.apex.attacks keys that differ under "
                "'attacks' or the orchestrator settings under 'orchestrator'"
            )


def from_dict(raw: dict[str, Any], source: str = "config", files: tuple[str | Path, ...] = ()) -> Config:
    return Config.model_validate(validate(raw, source, files))


def load(paths: str | Path | Sequence[str | Path]) -> Config:
    """The configuration of one file, or of several laid over each other in order as Snakemake merges its
    ``--configfile`` files: a mapping merges key by key, any other value (a list included) replaces."""
    files = (paths,) if isinstance(paths, str | Path) else tuple(paths)
    if not files:
        raise ConfigError("no configuration file given")
    raw: dict[str, Any] = {}
    for f in files:
        raw = overlay(raw, read_config_file(f))
    return from_dict(raw, " + ".join(map(str, files)), files)


def overlay(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` laid over ``base``: mappings merge key by key, any other value of ``over`` replaces."""
    out = dict(base)
    for k, v in over.items():
        out[k] = overlay(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
