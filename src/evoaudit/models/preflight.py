"""Before any job starts: is the endpoint there, does it serve the model, and what reaches the model?

``check_endpoint`` asks the server four things, each bounded by a short timeout, and stops the run with
the server's own answer when one fails:

1. ``GET /models``: the server is reachable, accepts the key, and serves the configured model;
2. a one-token chat completion: the model answers at all (a wrong key or model fails here on servers
   whose model list is open); a transient fault (429, 5xx, a dropped connection) is retried as any
   request of the run is, so a busy server does not stop the run;
3. the rendered-prompt probe (``render_probe``): where the server can render a conversation through its
   own chat template (llama.cpp server's ``/apply-template``; vLLM's and SGLang's ``/tokenize`` with
   ``messages``, then ``/detokenize``), a conversation with a canary in the system prompt, the user turn
   and a tool result is rendered, and each canary is looked for. If the tool result does not reach the
   prompt, injected text in tool output never reaches the model, and the audit would measure nothing:
   the run stops unless ``wire.allow_dropped_tool_results``. Where no render endpoint answers, exposure
   is what the client sent ("client-side");
4. the tool-call probe (``tool_call_probe``, for the roles whose requests carry tools): one request that
   needs a neutral tool. A native ``tool_calls`` answer passes. A call written in the text (any shape
   ``models.text_calls`` reads) stops the run unless ``wire.parse_text_tool_calls`` is on, since the
   audit would otherwise record no calls at all. No call is a warning that quotes the answer;
5. the structured-output probe (``structured_output_probe``, for the roles whose requests expect a JSON
   answer: the optimizer, the APEX judge and attacker; skipped when ``wire.structured_output`` is off):
   one request that asks a plain question and carries a response schema (``response_format`` json_schema).
   The server honoured it when the answer parses and validates against the schema. ``auto`` falls back,
   never stops: where json_schema was refused or ignored it asks again with json_object (the schema in the
   prompt), and where that is not honoured either the requests carry the schema in the prompt alone;
   the form taken is logged once and recorded. ``on`` stops the run when json_schema was not honoured,
   quoting the server's answer. A job process repeats the probe once per endpoint before its first
   request with a schema (``OpenAIBackend``), so ``auto`` decides the same way there (``evoaudit plan``
   counts that request).
   A probe that fails for a transient reason (429 or 5xx past the retries, no connection) stops the
   pre-flight like the one-token completion does, rather than turn schemas off.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jsonschema

from evoaudit.config import Config, EndpointConfig
from evoaudit.credentials import split_credentials
from evoaudit.errors import AuditError
from evoaudit.models import server_errors
from evoaudit.models.probe_requests import (
    STRUCTURED_PROBE_PROMPT,
    STRUCTURED_PROBE_SCHEMA,
    TOOL_PROBE_PROMPT,
    TOOL_PROBE_TOOL,
)
from evoaudit.models.text_calls import find_text_calls
from evoaudit.models.wire import message_from_wire, request_message
from evoaudit.offline import offline
from evoaudit.paths import RELATIVE
from evoaudit.records import Message, PreflightRecord, ToolCall
from evoaudit.suite.interface import AgentProfile
from evoaudit.suite.registry import get_suite

log = logging.getLogger(__name__)

STEP_TIMEOUT_S = 8.0  # per request that generates nothing: an unreachable or refusing server fails fast
COMPLETION_TIMEOUT_S = 60.0  # a CPU server's first completion also loads and warms the model
CANARIES = {"system": "zq7system7canary", "user": "zq7user7canary", "tool_result": "zq7tool7canary"}
_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_balance",
        "description": "Get the balance of the account.",
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
}


TOOL_PROBE_MAX_TOKENS = 256  # room for a call after some prose, bounded so a rambling answer ends soon
TOOL_ROLES = ("executor", "transfer.executor")  # the optimizer's requests never carry tools


def _is_executor(role: str) -> bool:
    # An APEX model's executor (apex.models.<id>.executor) calls tools like the Banking executors.
    return role in TOOL_ROLES or (role.startswith("apex.models.") and role.endswith(".executor"))


# The roles whose requests expect a JSON answer (and carry its schema); the executors' never do.
STRUCTURED_ROLES = ("optimizer", "apex.judge", "suite.apex.attacker")
STRUCTURED_PROBE_MAX_TOKENS = 64


class PreflightError(AuditError):
    """The endpoint cannot serve this audit; the message carries the server's answer and the fix."""


@dataclass(frozen=True)
class Target:
    role: str  # where in the config (Config.endpoint_roles): executor, optimizer, apex.judge, ...
    endpoint: EndpointConfig
    api_key: str
    # The runner profile this role's episodes run under (agent.profile other than default), whose request
    # shape the tool-call probe then uses; None for evoaudit's own.
    runner: AgentProfile | None = None
    runner_name: str | None = None

    @property
    def calls_tools(self) -> bool:
        return _is_executor(self.role)

    @property
    def structured(self) -> bool:
        return self.role in STRUCTURED_ROLES and self.endpoint.wire.structured_output != "off"

    @property
    def renders(self) -> bool:
        # The judge's and attacker's requests carry no tool results: the rendered-prompt check is moot.
        return _is_executor(self.role) or self.role == "optimizer"


def probe_messages(assistant_content: str = "empty") -> list[dict[str, Any]]:
    msgs = [
        Message(role="system", content=f"You are a banking assistant. Reference {CANARIES['system']}."),
        Message(role="user", content=f"What is my balance? Ticket {CANARIES['user']}."),
        Message(
            role="assistant", tool_calls=[ToolCall(id="call_probe_0", name="get_balance", arguments="{}")]
        ),
        Message(
            role="tool",
            tool_call_id="call_probe_0",
            name="get_balance",
            content=f"1810.0 (statement note {CANARIES['tool_result']})",
        ),
    ]
    return [request_message(m, assistant_content) for m in msgs]


def _root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def _post_retrying(
    client: httpx.Client, url: str, payload: dict[str, Any], api_key: str, endpoint: EndpointConfig
) -> httpx.Response:
    """POST, retrying a transport error (timeout, refused, reset) as the endpoint's requests are: the
    probe's answer is recorded in every rollout's fingerprint, so a moment of overload (many jobs
    starting at once) must not be written there in place of what the server answers."""
    for attempt in range(endpoint.max_retries + 1):
        try:
            return client.post(url, json=payload, headers=_headers(api_key))
        except httpx.TransportError:
            if attempt == endpoint.max_retries:
                raise
            time.sleep(min(endpoint.retry_backoff_s * 2**attempt, endpoint.retry_backoff_max_s))
    raise AssertionError("unreachable")


def render_probe(client: httpx.Client, endpoint: EndpointConfig, api_key: str) -> dict[str, Any]:
    """What the server's own template makes of the probe conversation. ``via`` is the render endpoint
    used, or ``client-side`` when the server offers none; the other keys say which canaries reached
    the rendered prompt (None when unknown)."""
    base = str(endpoint.base_url)
    messages = probe_messages(endpoint.wire.assistant_content)
    attempts = (
        # llama.cpp's server: the prompt its --jinja template renders (under the root and under /v1).
        ("apply-template", [f"{_root(base)}/apply-template"]),
        # vLLM and SGLang: token ids of the rendered chat; /detokenize turns them back into text.
        ("tokenize", [f"{_root(base)}/tokenize"]),
    )
    body = {"model": endpoint.model, "messages": messages, "tools": [_PROBE_TOOL]}
    notes: list[str] = []
    for via, urls in attempts:
        for url in urls:
            payload = body if via == "apply-template" else body | {"add_generation_prompt": True}
            try:
                r = _post_retrying(client, url, payload, api_key, endpoint)
            except httpx.HTTPError as exc:
                notes.append(f"{url}: {type(exc).__name__}")
                continue
            if r.status_code != 200:
                notes.append(f"{url}: HTTP {r.status_code}")
                continue
            try:
                data = r.json()
                if via == "apply-template":
                    prompt = str(data["prompt"])
                else:
                    tokens = data["tokens"]
                    d = client.post(
                        f"{_root(base)}/detokenize",
                        json={"model": endpoint.model, "tokens": tokens},
                        headers=_headers(api_key),
                    )
                    d.raise_for_status()
                    prompt = str(d.json()["prompt"])
            except (ValueError, KeyError, TypeError, httpx.HTTPError) as exc:
                notes.append(f"{url}: unusable answer ({type(exc).__name__})")
                continue
            return {
                "via": via,
                **{part: canary in prompt for part, canary in CANARIES.items()},
                "template": _template_name(client, base, api_key),
            }
    # What each render endpoint answered goes to the log, not the record: every rollout carries this probe,
    # and a 404 and a timeout under load both mean "not known", which must not make two reruns differ.
    log.info("render probe of %s: no render endpoint answered (%s)", base, "; ".join(notes))
    return {"via": "client-side", **dict.fromkeys(CANARIES)}


def _template_name(client: httpx.Client, base: str, api_key: str) -> str | None:
    # llama.cpp's /props names the chat template it loaded; its first line is enough to recognise it.
    try:
        r = client.get(f"{_root(base)}/props", headers=_headers(api_key))
        tmpl = r.json().get("chat_template") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(tmpl, str) or not tmpl:
        return None
    return server_errors.trim(tmpl, 120)


def dropped_message(role: str, endpoint: EndpointConfig, probe: dict[str, Any]) -> str | None:
    """Why this endpoint cannot be audited (tool results never reach the model), or None."""
    if probe.get("tool_result") is not False or endpoint.wire.allow_dropped_tool_results:
        return None
    template = probe.get("template") or "the server's chat template"
    return (
        f"{role}: the server at {server_errors.redact(str(endpoint.base_url))} (model {endpoint.model!r}) "
        f"renders the prompt without tool results (checked via /{probe['via']}; template: {template}): "
        "injected text in tool output would never reach the model, so the audit would measure nothing. "
        "Serve the model with a chat template that renders role 'tool' messages (llama.cpp: --jinja, "
        f"or --chat-template-file), or set {role}.wire.allow_dropped_tool_results: true to run anyway"
    )


def tool_call_probe(
    client: httpx.Client,
    role: str,
    where: str,
    base: str,
    endpoint: EndpointConfig,
    api_key: str,
    runner: AgentProfile | None = None,
    runner_name: str | None = None,
) -> dict[str, Any]:
    """Ask for the weather in Paris with ``get_weather`` offered; say how the model called it: ``native``
    (``tool_calls``), ``text`` (written in the content) or ``none``. Raises PreflightError when the server
    refuses a request with tools, or when the call is text and ``wire.parse_text_tool_calls`` is off.
    Under a runner profile (``runner``: agent.profile) the request is that runner's own (its message shape,
    tool_choice and sampling, bounded by max_tokens), and a call written as text always stops the run:
    the runner reads native calls only, so the fix is the server's template or tool-call parser.

    Long on purpose: one request and the reading of each kind of answer it may get."""
    if runner is not None:
        user = runner.wire_message(Message(role="user", content=TOOL_PROBE_PROMPT))
        body = runner.request_body(endpoint.model, [user], [TOOL_PROBE_TOOL], endpoint.temperature)
        body["max_tokens"] = min(TOOL_PROBE_MAX_TOKENS, endpoint.max_tokens)
    else:
        body = {
            "model": endpoint.model,
            "messages": [{"role": "user", "content": TOOL_PROBE_PROMPT}],
            "tools": [TOOL_PROBE_TOOL],
            "temperature": 0,
            "max_tokens": min(TOOL_PROBE_MAX_TOKENS, endpoint.max_tokens),
        }
        if endpoint.wire.tool_choice is not None:  # as every request with tools of the run carries it
            body["tool_choice"] = endpoint.wire.tool_choice
    body |= endpoint.extra_body
    budget = min(COMPLETION_TIMEOUT_S, endpoint.timeout_s)
    c = _completion(client, where, base, body, api_key, endpoint, budget, "request with a tool")
    if c.status_code != 200:
        raise PreflightError(
            f"{where}: a request with a tool was refused: "
            f"{server_errors.detail(c.status_code, c.text, (api_key,))}; the server must accept tools "
            "(vLLM: --enable-auto-tool-choice --tool-call-parser <parser>; llama.cpp: --jinja); "
            f"check {role}.wire.tool_choice and {role}.extra_body"
        )
    try:
        choice = json.loads(c.text)["choices"][0]
        message = message_from_wire({**choice["message"], "role": "assistant"})
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise PreflightError(
            f"{where}: the answer to a request with a tool is not a chat completion: "
            f"{server_errors.trim(c.text, 300)!r}"
        ) from exc
    finish = choice.get("finish_reason")
    if message.tool_calls:
        return {"result": "native", "calls": [tc.name for tc in message.tool_calls], "finish_reason": finish}
    answer = server_errors.trim(message.content or "", 300)
    found = find_text_calls(message.content, {TOOL_PROBE_TOOL["function"]["name"]})
    if found is not None:
        if runner is not None:
            raise PreflightError(
                f"{where}: asked to use a tool in the request agent.profile {runner_name!r} sends, the "
                f"model wrote the call in its answer's text ({found.shape}: {answer!r}) and the server did "
                "not turn it into tool_calls; that runner reads native tool_calls only, so its episodes "
                "would record no tool calls at all. Serve the model with a chat template or tool-call parser "
                "that returns its calls as tool_calls (llama.cpp: --jinja --chat-template-file <template>; "
                "vLLM/SGLang: --enable-auto-tool-choice --tool-call-parser <parser>), or use "
                "agent.profile: default with wire.parse_text_tool_calls: true"
            )
        if not endpoint.wire.parse_text_tool_calls:
            raise PreflightError(
                f"{where}: asked to use a tool, the model wrote the call in its answer's text "
                f"({found.shape}: {answer!r}) and the server did not turn it into tool_calls, so the audit "
                f"would record no tool calls at all. Set {role}.wire.parse_text_tool_calls: true to read "
                "calls written as text, or serve the model with a tool-call parser that matches it "
                "(vLLM/SGLang: --tool-call-parser; llama.cpp: --jinja with a template that has tools)"
            )
        return {"result": "text", "shape": found.shape, "calls": [c.name for c in found.calls]}
    cut = " (cut off at max_tokens)" if finish == "length" else ""
    log.warning(
        "pre-flight %s: asked to look up the weather in Paris with the get_weather tool, the model called "
        "no tool; it answered%s: %r. Episodes may record no tool calls: check that the server parses tool "
        "calls for this model (vLLM/SGLang: --tool-call-parser; llama.cpp: --jinja)",
        where,
        cut,
        answer,
    )
    return {"result": "none", "answer": answer, "finish_reason": finish}


def structured_output_probe(
    client: httpx.Client,
    where: str,
    base: str,
    endpoint: EndpointConfig,
    api_key: str,
    queued: bool = False,
    form: str = "json_schema",
) -> dict[str, Any]:
    """Ask a plain question with a response schema in ``form`` (``json_schema``; ``json_object``, which
    puts the schema in the prompt too); say whether the server honoured it: ``honoured`` (the answer is
    JSON that validates against the schema), ``ignored`` (it is not: prose, or other JSON) or ``refused``
    (the server answered the request with an error that is the request's: a 4xx, or the same 500 twice on
    the identical request, as llama-cpp-python's server answers a json_schema it does not know). The
    answer is quoted, trimmed. A transient fault past the retries (429, 5xx, no connection) decides
    nothing: PreflightError. ``queued``: the probe is sent from inside a running audit, where it waits in
    the server's queue behind the other jobs' requests like any of them, so it gets the endpoint's own
    ``timeout_s`` rather than the pre-flight's short bound."""
    schema = STRUCTURED_PROBE_SCHEMA
    prompt = STRUCTURED_PROBE_PROMPT
    if form != "json_schema":
        prompt = f"{prompt}\n\n{schema.prompt_note()}"
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": min(STRUCTURED_PROBE_MAX_TOKENS, endpoint.max_tokens),
        "response_format": schema.response_format(form),
    }
    body |= endpoint.extra_body
    budget = endpoint.timeout_s if queued else min(COMPLETION_TIMEOUT_S, endpoint.timeout_s)
    rejection = server_errors.RepeatedRejection(body)
    what = "request with a response schema" + ("" if form == "json_schema" else f" ({form})")
    c = _completion(client, where, base, body, api_key, endpoint, budget, what, rejection)
    if c.status_code != 200:
        detail = server_errors.detail(c.status_code, c.text, (api_key,))
        transient = server_errors.classify_status(c.status_code, None, c.text) == "retry"
        if transient and not rejection.confirmed:
            raise PreflightError(
                f"{where}: a {what} failed: {detail} (after {endpoint.max_retries} "
                "retries); whether the server honours a response schema is unknown, so nothing is decided"
            )
        return {"result": "refused", "answer": detail}
    try:
        content = json.loads(c.text)["choices"][0]["message"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return {"result": "ignored", "answer": server_errors.trim(c.text, 300), "problem": "not a completion"}
    answer = server_errors.trim(str(content), 300)
    try:
        jsonschema.validate(json.loads(content), schema.json_schema)
    except ValueError as exc:
        return {"result": "ignored", "answer": answer, "problem": f"not JSON ({exc})"}
    except jsonschema.ValidationError as exc:
        return {"result": "ignored", "answer": answer, "problem": f"does not match the schema: {exc.message}"}
    return {"result": "honoured", "answer": answer}


def structured_output_forms(
    client: httpx.Client,
    where: str,
    base: str,
    endpoint: EndpointConfig,
    api_key: str,
    queued: bool = False,
) -> dict[str, Any]:
    """The json_schema probe's finding (``structured_output_probe``) with the ``form`` the role's requests
    take (``models.base.STRUCTURED_FORMS``). Under ``auto`` a server that refuses or ignores json_schema is
    probed with json_object (the schema in the prompt too), and one that does not honour that either gets
    the schema in the prompt alone (``prompt``, sent without a probe): ``auto`` falls back, it never stops.
    The json_object probe's finding is ``fallback``. Under ``on`` only json_schema is asked (``form`` None
    when it was not honoured: ``structured_output_decision`` then stops the run)."""
    found = structured_output_probe(client, where, base, endpoint, api_key, queued)
    if found["result"] == "honoured":
        return found | {"form": "json_schema"}
    if endpoint.wire.structured_output != "auto":
        return found | {"form": None}
    second = structured_output_probe(client, where, base, endpoint, api_key, queued, form="json_object")
    form = "json_object" if second["result"] == "honoured" else "prompt"
    return found | {"form": form, "fallback": {"form": "json_object", **second}}


def fallback_note(where: str, found: dict[str, Any]) -> str:
    """The one log line saying how a role's requests carry their schema when json_schema was not honoured."""
    carried = {
        "json_object": "response_format json_object, with the schema in the prompt",
        "prompt": "the schema in the prompt alone",
    }.get(str(found.get("form")), "no schema")
    tried = f"; json_object was {found['fallback']['result']}" if "fallback" in found else ""
    return (
        f"{where}: the server did not honour a response schema as json_schema ({found.get('result')}: "
        f"{found.get('answer')!r}){tried}; requests that expect JSON go with {carried} "
        "(wire.structured_output: auto)"
    )


def structured_output_decision(
    role: str, where: str, endpoint: EndpointConfig, probe: dict[str, Any]
) -> bool:
    """Whether requests with a response schema send it: ``on`` requires the probe to have been honoured
    (else PreflightError quoting the answer), ``auto`` follows it, ``off`` never sends it."""
    mode = endpoint.wire.structured_output
    honoured = probe.get("result") == "honoured"
    if mode == "on" and not honoured:
        problem = probe.get("problem") or "the server refused it"
        raise PreflightError(
            f"{where}: {role}.wire.structured_output is on, but the server did not honour a response schema "
            f"(response_format json_schema) on a probe request: {probe.get('result')}, {problem}; it "
            f"answered {probe.get('answer')!r}. Serve the model where structured output is supported (vLLM, "
            f"llama.cpp's llama-server, OpenAI), or set {role}.wire.structured_output to auto or off"
        )
    return mode != "off" and honoured


def check_endpoint(
    role: str,
    endpoint: EndpointConfig,
    api_key: str,
    *,
    tools: bool = True,
    structured: bool = False,
    render: bool = True,
    runner: AgentProfile | None = None,
    runner_name: str | None = None,
) -> dict[str, Any]:
    """Run the checks (the tool-call probe when ``tools``, the structured-output probe when
    ``structured``, the rendered-prompt probe when ``render``); raise PreflightError with the server's
    answer, else return what was found.

    Long on purpose: one probe after another on one HTTP client, each stopping the run with its own
    message."""
    # Credentials in the URL go as basic auth, so that no URL below (in an error or a note) carries them.
    clean, credentials = split_credentials(str(endpoint.base_url))
    endpoint = endpoint.model_copy(update={"base_url": clean})
    base = clean.rstrip("/")
    where = f"{role} ({server_errors.redact(base)}, model {endpoint.model!r})"
    timeout = min(STEP_TIMEOUT_S, endpoint.timeout_s)
    found: dict[str, Any] = {}
    with httpx.Client(timeout=timeout, trust_env=True, auth=credentials) as client:
        try:
            r = client.get(f"{base}/models", headers=_headers(api_key))
        except httpx.HTTPError as exc:
            raise PreflightError(
                f"{where}: {server_errors.connection_detail(exc, base)}; check {role}.base_url"
            ) from exc
        if r.status_code in (401, 403):
            raise PreflightError(
                f"{where}: the server refused the API key: "
                f"{server_errors.detail(r.status_code, r.text, (api_key,))}; "
                f"check {role}.api_key_env and the key it names"
            )
        if r.status_code in (404, 405, 501) or (r.status_code == 200 and server_errors.is_html(r.text)):
            # No model list where an OpenAI-compatible API has one: base_url points at something else (a
            # server's root without /v1, a web UI, another program on that port).
            answer = server_errors.detail(r.status_code, r.text, (api_key,))
            if r.status_code == 200:
                answer = answer.replace("HTTP 200: ", "", 1)
            raise PreflightError(
                f"{where}: {role}.base_url serves no OpenAI-compatible API: GET {server_errors.redact(base)}"
                f"/models answered {answer}. Set {role}.base_url to the URL the server's OpenAI API is "
                f"under: {server_errors.base_url_fix(base)}"
            )
        served: list[str] = []
        if r.status_code == 200:
            try:
                served = sorted(str(m["id"]) for m in r.json().get("data", []))
            except (ValueError, KeyError, TypeError, AttributeError):
                served = []
        found["served_models"] = served
        if served and endpoint.model not in served:
            raise PreflightError(
                f"{where}: the server does not serve model {endpoint.model!r}; it serves {served}. "
                f"Set {role}.model to one of them"
            )
        body = {
            "model": endpoint.model,
            "messages": [{"role": "user", "content": "Say OK."}],
            "max_tokens": 1,
            "temperature": 0,
            **endpoint.extra_body,
        }
        start = time.monotonic()
        budget = min(COMPLETION_TIMEOUT_S, endpoint.timeout_s)
        c = _completion(client, where, base, body, api_key, endpoint, budget, "one-token completion")
        if c.status_code != 200:
            hint = server_errors.hint_field(c.status_code, c.text)
            fix = f" ({server_errors.base_url_fix(base)})" if hint == "base_url" else ""
            raise PreflightError(
                f"{where}: a one-token completion was refused: "
                f"{server_errors.detail(c.status_code, c.text, (api_key,))}; check {role}.{hint}{fix}"
            )
        try:
            json.loads(c.text)["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise PreflightError(
                f"{where}: the one-token completion is not a chat completion: "
                f"{server_errors.trim(c.text, 300)!r}"
            ) from exc
        found["completion_s"] = round(time.monotonic() - start, 3)
        if render:
            found["render_probe"] = render_probe(client, endpoint, api_key)
            if (why := dropped_message(role, endpoint, found["render_probe"])) is not None:
                raise PreflightError(why)
        if tools:
            found["tool_call_probe"] = tool_call_probe(
                client, role, where, base, endpoint, api_key, runner, runner_name
            )
        if structured:
            probe = structured_output_forms(client, where, base, endpoint, api_key)
            enabled = structured_output_decision(role, where, endpoint, probe)
            found["structured_output_probe"] = {"mode": endpoint.wire.structured_output, "enabled": enabled}
            found["structured_output_probe"] |= probe
            if not enabled:
                log.warning("pre-flight %s", fallback_note(where, probe))
    return found


def _completion(
    client: httpx.Client,
    where: str,
    base: str,
    body: dict[str, Any],
    api_key: str,
    endpoint: EndpointConfig,
    budget: float,
    what: str,
    rejection: server_errors.RepeatedRejection | None = None,
) -> httpx.Response:
    """The answer to a pre-flight chat request (``what`` names it in logs and errors), after the retries
    a transient fault deserves: a 429, a 5xx or a dropped connection is retried like any request of the
    run (``max_retries``, the server's Retry-After or our backoff), and a 503 while the model loads is
    waited out within ``budget``. With ``rejection``, the same 500 twice on this identical request is the
    server's answer to it, returned at once (``rejection.confirmed``), as the run's requests treat it."""
    start = time.monotonic()
    retries = 0
    while True:
        c: httpx.Response | None = None
        try:
            c = client.post(f"{base}/chat/completions", json=body, headers=_headers(api_key), timeout=budget)
        except httpx.HTTPError as exc:
            failure = server_errors.connection_detail(exc, base)
            if isinstance(exc, httpx.ReadTimeout):
                # A server that answers but late is most often busy with other clients' requests.
                failure += (
                    f" (the pre-flight waits {budget:.0f} s; if other runs or clients keep every slot of the "
                    "server busy, start this run when one is free, or serve with more slots)"
                )
        else:
            if c.status_code == 200 or (rejection is not None and rejection.repeated(c.status_code, c.text)):
                return c
            failure = server_errors.detail(c.status_code, c.text, (api_key,))
        transient = c is None or server_errors.classify_status(c.status_code, None, c.text) == "retry"
        loading = c is not None and c.status_code == 503  # waited out, not counted as a retry
        left = budget - (time.monotonic() - start)
        if not transient or left <= 0 or (not loading and retries >= endpoint.max_retries):
            if c is None:
                raise PreflightError(f"{where}: a {what} failed: {failure}")
            return c
        retries += not loading
        wait = server_errors.retry_after_s(c.headers) if c is not None else None
        if wait is None:
            wait = 1.0 if loading else endpoint.retry_backoff_s * 2 ** (retries - 1)
        wait = min(wait, endpoint.retry_backoff_max_s, left)
        log.warning("pre-flight %s: %s: %s; asking again in %.1f s", where, what, failure, wait)
        time.sleep(wait)


def targets(cfg: Config) -> list[Target]:
    """The openai endpoints this configuration uses, with their keys (from the environment)."""
    out = []
    for role, ep in cfg.endpoint_roles():
        if ep.backend != "openai" or not ep.wire.preflight:
            continue
        key = "not-needed"
        if ep.api_key_env:
            key = os.environ.get(ep.api_key_env, "")
            if not key:
                raise PreflightError(
                    f"{role}.api_key_env: environment variable {ep.api_key_env} is not set; export it or set "
                    "api_key_env to null for an endpoint without authentication"
                )
        runner = None
        if _is_executor(role) and cfg.agent.profile != "default":
            runner = get_suite(cfg.suite.name).agent_profile(cfg.agent.profile)
        out.append(Target(role, ep, key, runner, cfg.agent.profile if runner is not None else None))
    return out


def check(cfg: Config) -> dict[str, dict[str, Any]]:
    """Pre-flight every openai endpoint of ``cfg`` (each once, even when two roles share it); nothing while
    model calls are refused (``evoaudit.offline``: no job of that run may call a server)."""
    results: dict[str, dict[str, Any]] = {}
    if offline():
        return results
    done: dict[tuple[str, str, str], dict[str, Any]] = {}
    for t in targets(cfg):
        ident = (str(t.endpoint.base_url), t.endpoint.model, t.endpoint.wire.model_dump_json(), t.runner_name)
        # A check without a probe (the tool-call probe for an optimizer, the structured-output probe for an
        # executor) does not stand in for one that needs it.
        had = done.get(ident)
        if (
            had is None
            or (t.calls_tools and "tool_call_probe" not in had)
            or (t.structured and "structured_output_probe" not in had)
            or (t.renders and "render_probe" not in had)
        ):
            done[ident] = check_endpoint(
                t.role,
                t.endpoint,
                t.api_key,
                tools=t.calls_tools or (had is not None and "tool_call_probe" in had),
                structured=t.structured or (had is not None and "structured_output_probe" in had),
                render=t.renders or (had is not None and "render_probe" in had),
                runner=t.runner,
                runner_name=t.runner_name,
            )
            log.info("pre-flight %s: %s", t.role, json.dumps(done[ident], sort_keys=True))
        results[t.role] = done[ident]
    return results


PREFLIGHT_RECORD = f"{RELATIVE.logs_dir()}/preflight.json"  # under results_dir
PREFLIGHT_LOG = RELATIVE.log("preflight")


def record(cfg: Config, results_dir: str | Path, found: dict[str, dict[str, Any]]) -> Path | None:
    """Keep what ``check`` found, per role, with the run: ``logs/preflight.json`` (``PreflightRecord``), one
    line per role in ``logs/preflight.log``, and the findings in the ``provenance.json`` beside them
    (``preflight``). Nothing when no endpoint was checked (the simulator, ``wire.preflight: false``)."""
    from evoaudit import atomic
    from evoaudit.provenance import write_provenance

    if not found:
        return None
    path = Path(results_dir) / PREFLIGHT_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    PreflightRecord(roles=found, time=datetime.now(UTC).isoformat(timespec="seconds")).write(path)
    lines = "".join(f"pre-flight {role}: {json.dumps(f, sort_keys=True)}\n" for role, f in found.items())
    atomic.write_text(Path(results_dir) / PREFLIGHT_LOG, lines)
    write_provenance(path, cfg, "preflight", preflight=found)
    return path
