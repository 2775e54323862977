"""Structured output over real loopback HTTP: the pre-flight's probe decides ``wire.structured_output:
auto`` (on where the server honours a response schema, off where it ignores it, recorded either way),
``on`` stops the run on a server that ignores it, and a request carries its schema in the body (and so in
the response-cache key) only when enabled. Also: every request kind's schema admits what its parser reads,
and the optimizer's malformed answers are counted."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from evoaudit import config as config_mod
from evoaudit.methods import common, reasoningbank, skillopt
from evoaudit.methods.evolve import JUDGEMENT_SCHEMA, _parse_judgement
from evoaudit.models import openai_backend, preflight
from evoaudit.models.base import ChatRequest, ResponseSchema
from evoaudit.models.http import Reply, Request, ServerThread
from evoaudit.models.openai_backend import OpenAIBackend
from evoaudit.records import Message
from evoaudit.suite.apex.attacks import attacker
from evoaudit.suite.apex.judging import judge

MODEL = "schema-model"
PROSE = "The capital of France is Paris, a city on the Seine."
PROBE_PARSE = "(Expecting value: line 1 column 1 (char 0))"  # json.loads on PROSE


def example(schema: dict[str, Any]) -> Any:
    """A small instance of ``schema`` (the subset the project's schemas use), as a constrained model's."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema["type"][0] if isinstance(schema["type"], list) else schema["type"]
    if kind == "object":
        return {k: example(v) for k, v in schema["properties"].items()}
    if kind == "array":
        return [example(schema["items"])]
    return {"string": "some words", "boolean": True, "integer": 0, "number": 0.5, "null": None}[kind]


@dataclass
class SchemaServer:
    """An OpenAI-compatible endpoint. ``honours``: a request with ``response_format`` json_schema gets a
    schema-valid JSON answer; otherwise (and always when it ignores the setting) the answer is prose."""

    honours: bool
    bodies: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, req: Request) -> Reply:
        path = req.path.rstrip("/")
        if req.method == "GET" and path == "/v1/models":
            return Reply.json({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if path != "/v1/chat/completions":
            return Reply.error(404, f"no route {req.path}", "not_found")
        body = req.json()
        self.bodies.append(body)
        fmt = body.get("response_format")
        content = PROSE
        if self.honours and fmt and fmt.get("type") == "json_schema":
            content = json.dumps(example(fmt["json_schema"]["schema"]))
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        return Reply.json({"id": "c1", "object": "chat.completion", "model": MODEL, "choices": [choice]})

    def schema_bodies(self) -> list[dict[str, Any]]:
        return [b for b in self.bodies if "response_format" in b]


def _endpoint(tmp_path: Path, base_url: str, mode: str) -> dict[str, Any]:
    return {
        "backend": "openai",
        "base_url": base_url,
        "model": MODEL,
        "timeout_s": 5,
        "max_retries": 1,
        "retry_backoff_s": 0.01,
        "retry_backoff_max_s": 0.05,
        "cache_path": str(tmp_path / "cache.sqlite"),
        "wire": {"structured_output": mode},
    }


def _cfg(tmp_path: Path, base_url: str, mode: str) -> config_mod.Config:
    return config_mod.from_dict({"optimizer": _endpoint(tmp_path, base_url, mode)})


@pytest.fixture(autouse=True)
def _fresh_probes():
    openai_backend._STRUCTURED_PROBES.clear()
    yield
    openai_backend._STRUCTURED_PROBES.clear()


# -- pre-flight --------------------------------------------------------------------------------------


def test_auto_is_enabled_where_the_server_honours_a_schema_and_recorded(tmp_path):
    server = SchemaServer(honours=True)
    with ServerThread(server) as srv:
        found = preflight.check(_cfg(tmp_path, srv.base_url, "auto"))["optimizer"]
    probe = found["structured_output_probe"]
    assert probe["mode"] == "auto" and probe["enabled"] is True and probe["result"] == "honoured"
    (sent,) = server.schema_bodies()
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["strict"] is True
    assert "JSON" not in sent["messages"][0]["content"]  # a plain question: only the schema asks for JSON


def test_auto_stays_off_where_the_server_ignores_a_schema_and_records_the_answer(tmp_path):
    with ServerThread(SchemaServer(honours=False)) as srv:
        found = preflight.check(_cfg(tmp_path, srv.base_url, "auto"))["optimizer"]
    probe = found["structured_output_probe"]
    assert probe["enabled"] is False and probe["result"] == "ignored"
    assert probe["answer"] == PROSE and "not JSON" in probe["problem"]


def test_on_stops_the_run_on_a_server_that_ignores_a_schema_naming_the_setting(tmp_path):
    with ServerThread(SchemaServer(honours=False)) as srv:
        with pytest.raises(preflight.PreflightError) as err:
            preflight.check(_cfg(tmp_path, srv.base_url, "on"))
    text = str(err.value)
    assert "optimizer.wire.structured_output is on" in text and PROSE in text


def test_off_sends_no_probe(tmp_path):
    server = SchemaServer(honours=True)
    with ServerThread(server) as srv:
        found = preflight.check(_cfg(tmp_path, srv.base_url, "off"))["optimizer"]
    assert "structured_output_probe" not in found and not server.schema_bodies()


def test_an_executor_gets_no_structured_output_probe(tmp_path):
    server = SchemaServer(honours=True)
    with ServerThread(server) as srv:
        ep = _endpoint(tmp_path, srv.base_url, "on")
        cfg = config_mod.from_dict({"executor": ep})
        # The executor's tool-call probe finds no call (a warning); no schema is ever sent for it.
        found = preflight.check(cfg)["executor"]
    assert "structured_output_probe" not in found and not server.schema_bodies()


# -- requests ----------------------------------------------------------------------------------------

REQUEST = ChatRequest(
    messages=(Message(role="user", content="Distil this."),),
    seed=3,
    response_schema=reasoningbank.MEMORIES_SCHEMA,
)


def _ask(tmp_path: Path, url: str, mode: str, request: ChatRequest = REQUEST) -> tuple[str, dict[str, Any]]:
    backend = OpenAIBackend(_cfg(tmp_path, url, mode).optimizer)
    answer = asyncio.run(backend.complete(request)).message.content or ""
    return answer, backend.fingerprint()


def _asked(server: SchemaServer) -> list[dict[str, Any]]:
    # A request that carries its schema in the prompt has it after the request's own text.
    return [b for b in server.bodies if b["messages"][0]["content"].startswith("Distil this.")]


@pytest.mark.parametrize(
    ("mode", "honours", "sent"),
    [("on", True, True), ("off", True, False), ("auto", True, True), ("auto", False, False)],
)
def test_a_request_carries_its_schema_only_when_enabled(tmp_path, mode, honours, sent):
    server = SchemaServer(honours=honours)
    with ServerThread(server) as srv:
        answer, fp = _ask(tmp_path, srv.base_url, mode)
    (body,) = _asked(server)
    assert ("response_format" in body) is sent
    if sent:
        assert body["response_format"]["json_schema"]["name"] == "reasoningbank_memories"
        assert body["response_format"]["json_schema"]["schema"] == reasoningbank.MEMORIES_SCHEMA.json_schema
        assert reasoningbank.parse_items(answer, 3, "success")[0].title == "some words"
    else:
        assert answer == PROSE
    # auto on a server that honours neither json_schema nor json_object: the schema goes in the prompt.
    in_prompt = mode == "auto" and not sent
    assert (reasoningbank.MEMORIES_SCHEMA.prompt_note() in body["messages"][-1]["content"]) is in_prompt
    if mode != "off":
        ignored = "the structured-output probe was ignored, not JSON " + PROBE_PARSE
        reason = {} if sent else {"form": "prompt", "reason": ignored}
        assert fp["structured_output"] == {"mode": mode, "enabled": sent} | reason


def test_a_request_without_a_schema_never_sends_one_nor_probes(tmp_path):
    server = SchemaServer(honours=True)
    with ServerThread(server) as srv:
        _ask(tmp_path, srv.base_url, "auto", ChatRequest(messages=REQUEST.messages, seed=3))
    assert len(server.bodies) == 1 and not server.schema_bodies()


def test_the_cache_key_holds_the_schema_when_it_is_sent(tmp_path):
    server = SchemaServer(honours=True)
    with ServerThread(server) as srv:
        first, _ = _ask(tmp_path, srv.base_url, "off")
        second, _ = _ask(
            tmp_path, srv.base_url, "on"
        )  # same cache file: with the schema it is another request
        again, _ = _ask(tmp_path, srv.base_url, "on")
    assert first == PROSE and second != PROSE and again == second
    assert len(_asked(server)) == 2


def test_a_cached_auto_run_needs_no_probe(tmp_path):
    server = SchemaServer(honours=True)
    with ServerThread(server) as srv:
        answer, _ = _ask(tmp_path, srv.base_url, "auto")
        assert len(server.schema_bodies()) == 2  # the probe, then the request
        openai_backend._STRUCTURED_PROBES.clear()  # a new job process
        before = len(server.bodies)
        again, _ = _ask(tmp_path, srv.base_url, "auto")
    assert again == answer and len(server.bodies) == before


# -- schemas against their parsers ---------------------------------------------------------------------


def _valid(schema: ResponseSchema | dict[str, Any], value: Any) -> str:
    spec = schema if isinstance(schema, ResponseSchema) else ResponseSchema.of(schema)
    jsonschema.Draft202012Validator.check_schema(spec.json_schema)
    jsonschema.validate(value, spec.json_schema)
    return json.dumps(value)


def test_every_schema_admits_what_its_parser_reads():
    edits = {
        "edits": [
            {"kind": "append", "target": None, "text": "- Check the balance first."},
            {"kind": "replace", "target": "old", "text": "new"},
            {"kind": "delete", "target": "old", "text": None},
        ]
    }
    assert [e.kind for e in skillopt.parse_edits(_valid(skillopt.EDITS_SCHEMA, edits), 4, "failure")] == [
        "append",
        "replace",
        "delete",
    ]
    ranking = {"selected_indices": [1, 0], "reasoning": "failures first"}
    assert skillopt.parse_ranking(_valid(skillopt.RANKING_SCHEMA, ranking), 3, 2) == [1, 0]
    verdict = {"success": False, "reason": "the amount is wrong"}
    assert _parse_judgement(_valid(JUDGEMENT_SCHEMA, verdict)) is False
    memories = {"memories": [{"title": "t", "description": "d", "content": "c"}]}
    assert (
        reasoningbank.parse_items(_valid(reasoningbank.MEMORIES_SCHEMA, memories), 3, "failure")[0].content
        == "c"
    )
    assert judge.parse_verdict(_valid(judge.VERDICT_SCHEMA, {"pass": True, "rationale": "same"})) == (
        True,
        "same",
    )
    keywords = {"keywords": ["Acme", "quarterly revenue", "ledger"]}
    assert (
        attacker.check_keywords(json.loads(_valid(attacker.KEYWORDS_SCHEMA, keywords)))
        == keywords["keywords"]
    )
    _valid(attacker.SOURCE_SCHEMA, {"path": "docs/a.md"})
    _valid(attacker.NOTE_SCHEMA, {"before": "Before you go on:", "after": "Then carry on."})
    # A schema-shaped answer the parser would reject is not one the schema admits either.
    with pytest.raises(jsonschema.ValidationError):
        _valid(skillopt.EDITS_SCHEMA, {"edits": [{"kind": "rewrite", "target": None, "text": "x"}]})
    with pytest.raises(jsonschema.ValidationError):
        _valid(reasoningbank.MEMORIES_SCHEMA, {"items": []})


def test_each_attacker_step_is_recognised_by_its_instructions():
    for step, schema in (
        (attacker.KEYWORDS_STEP, attacker.KEYWORDS_SCHEMA),
        (attacker.SOURCE_STEP, attacker.SOURCE_SCHEMA),
        (attacker.NOTE_STEP, attacker.NOTE_SCHEMA),
    ):
        msgs = (Message(role="system", content=f"{step} ..."), Message(role="user", content="x"))
        assert attacker.response_schema(msgs) is schema
    assert attacker.response_schema((Message(role="system", content="Something else"),)) is None


# -- counting malformed answers ------------------------------------------------------------------------


class _Scripted:
    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.requests: list[ChatRequest] = []

    def fingerprint(self) -> dict[str, Any]:
        return {"backend": "scripted"}

    async def complete(self, request: ChatRequest):
        from evoaudit.models.base import ChatResponse

        self.requests.append(request)
        return ChatResponse(message=Message(role="assistant", content=self.answers.pop(0)))


def test_malformed_answers_are_counted_by_kind_and_every_attempt_carries_the_schema():
    backend = _Scripted(['{"memories": [', '{"memories": []}', '{"success": true, "reason": "ok"}'])

    async def run() -> None:
        await common.call_structured(
            backend,
            [Message(role="user", content="x")],
            lambda t: reasoningbank.parse_items(t, 3, "success"),
            seed=lambda a: a,
            max_attempts=2,
            purpose="distil/i1",
            schema=reasoningbank.MEMORIES_SCHEMA,
        )
        await common.call_structured(
            backend,
            [Message(role="user", content="y")],
            _parse_judgement,
            seed=lambda a: a,
            max_attempts=2,
            purpose="judge/i1",
            schema=JUDGEMENT_SCHEMA,
        )

    with common.counting() as tally:
        asyncio.run(run())
    assert tally.as_dict() == {
        "answers_asked": 3,
        "malformed_answers": 1,
        "malformed_rate": round(1 / 3, 6),
        "by_kind": {
            "distil": {"answers_asked": 2, "malformed_answers": 1},
            "judge": {"answers_asked": 1, "malformed_answers": 0},
        },
    }
    assert [r.response_schema for r in backend.requests] == [
        reasoningbank.MEMORIES_SCHEMA,
        reasoningbank.MEMORIES_SCHEMA,
        JUDGEMENT_SCHEMA,
    ]


# -- a schema the server rejects, a probe that fails transiently, the probe in the plan -------------------


@dataclass
class PickyServer(SchemaServer):
    """Honours the probe's simple schema, rejects any other response_format with HTTP 400 (a grammar it
    cannot compile); ``probe_status``: the status the probe gets instead, while set."""

    probe_status: int | None = None

    async def __call__(self, req: Request) -> Reply:
        if req.path.rstrip("/") == "/v1/chat/completions":
            fmt = req.json().get("response_format")
            if fmt and fmt["json_schema"]["name"] != preflight.STRUCTURED_PROBE_SCHEMA.name:
                self.bodies.append(req.json())
                return Reply.error(400, "response_format: unsupported schema", "invalid_request_error")
            if fmt and self.probe_status is not None:
                self.bodies.append(req.json())
                return Reply.error(self.probe_status, "overloaded", "server_error")
        return await super().__call__(req)


def test_auto_resends_a_request_whose_schema_is_rejected_without_it_and_latches_off(tmp_path, caplog):
    server = PickyServer(honours=True)
    with ServerThread(server) as srv:
        backend = OpenAIBackend(_cfg(tmp_path, srv.base_url, "auto").optimizer, role="optimizer")
        with caplog.at_level("WARNING", logger="evoaudit.models.openai_backend"):
            answer = asyncio.run(backend.complete(REQUEST)).message.content
            again = asyncio.run(backend.complete(REQUEST.model_copy(update={"seed": 4}))).message.content
        fp = backend.fingerprint()
        # A new backend of the same process: off already, and a cached answer without the schema.
        cached = asyncio.run(OpenAIBackend(backend.endpoint).complete(REQUEST))
    assert answer == again == PROSE
    first, resent, second = _asked(server)
    assert "response_format" in first and "response_format" not in resent and "response_format" not in second
    so = fp["structured_output"]
    assert so["mode"] == "auto" and so["enabled"] is False
    assert "rejected" in so["reason"] and "HTTP 400" in so["reason"]
    assert sum("rejected a request's response schema" in r.getMessage() for r in caplog.records) == 1
    # The schema is in the key exactly when it is sent: the answer without it is what the cache holds.
    assert cached.cached and cached.message.content == PROSE
    assert backend.cache_key(backend.request_body(REQUEST, structured=False)) != backend.cache_key(
        backend.request_body(REQUEST, structured=True)
    )


def test_on_stops_on_a_rejected_schema_naming_the_setting(tmp_path):
    server = PickyServer(honours=True)
    with ServerThread(server) as srv:
        backend = OpenAIBackend(_cfg(tmp_path, srv.base_url, "on").optimizer, role="optimizer")
        with pytest.raises(openai_backend.EndpointError) as err:
            asyncio.run(backend.complete(REQUEST))
    assert "optimizer.wire.structured_output is on" in str(err.value) and "HTTP 400" in str(err.value)
    assert len(_asked(server)) == 1  # not sent again without it


def test_a_transiently_failing_probe_decides_nothing(tmp_path):
    server = PickyServer(honours=True, probe_status=503)
    with ServerThread(server) as srv:
        backend = OpenAIBackend(_cfg(tmp_path, srv.base_url, "auto").optimizer)
        with pytest.raises(openai_backend.InfraFailure) as err:
            asyncio.run(backend.complete(REQUEST))
        assert err.value.kind == "retries_exhausted" and "probe" in str(err.value)
        assert not openai_backend._STRUCTURED_PROBES and "structured_output" not in backend.fingerprint()
        server.probe_status = None  # the server recovers: the next request probes again, and sends its schema
        asyncio.run(backend.complete(REQUEST))
    assert backend.fingerprint()["structured_output"]["enabled"] is False  # this schema is rejected: latched
    assert any("response_format" in b for b in _asked(server))


def test_a_transiently_failing_probe_stops_the_preflight(tmp_path):
    with ServerThread(PickyServer(honours=True, probe_status=503)) as srv:
        with pytest.raises(preflight.PreflightError) as err:
            preflight.check(_cfg(tmp_path, srv.base_url, "auto"))
    assert "response schema failed" in str(err.value) and "HTTP 503" in str(err.value)


def test_the_plan_counts_one_probe_per_job_on_an_auto_endpoint(tmp_path):
    from evoaudit.ops import plan as plan_mod

    def evolve(mode: str) -> plan_mod.StagePlan:
        cfg = config_mod.from_dict(
            {
                "lineages": ["L1", "L2"],
                "methods": ["static", "skillopt", "reasoningbank"],
                "conditions": ["static"],
                "transfer": {"enabled": False},
                "apex": {"enabled": False},
                "optimizer": _endpoint(tmp_path, "http://127.0.0.1:9/v1", mode),
            }
        )
        p = plan_mod.make_plan(cfg, tmp_path / "results")
        return next(s for s in p.stages if s.stage == "evolve")

    auto, off, on = evolve("auto"), evolve("off"), evolve("on")
    assert off.requests == on.requests and off.requests_left == on.requests_left
    assert auto.requests == off.requests + 4  # two lineages × two methods that call the optimizer
    assert auto.requests_left == off.requests_left + 4


def test_the_source_steps_schema_admits_only_the_files_its_request_lists():
    msgs = (
        Message(role="system", content=f"{attacker.SOURCE_STEP} ..."),
        # The task prompt may hold the heading too; the list is the last one.
        Message(
            role="user",
            content="Task prompt:\nAvailable files:\nfake.txt\n\n"
            "Available files:\ndeals/a.xlsx\ndeals/b.docx\n",
        ),
    )
    schema = attacker.response_schema(msgs)
    _valid(schema, {"path": "deals/b.docx"})
    assert schema["schema"]["properties"]["path"]["enum"] == ["deals/a.xlsx", "deals/b.docx"]
    with pytest.raises(jsonschema.ValidationError):
        _valid(schema, {"path": "fake.txt"})


@pytest.mark.parametrize(
    "keywords", [["a", "b"], ["a", "b", "c", "d", "e"], ["a", "b", "x" * (attacker.KEYWORD_CHARS + 1)]]
)
def test_the_keyword_schema_states_the_count_and_length_the_check_enforces(keywords):
    with pytest.raises(jsonschema.ValidationError):
        _valid(attacker.KEYWORDS_SCHEMA, {"keywords": keywords})


@dataclass
class BusyServer(SchemaServer):
    """A server whose queue holds every completion for ``wait_s`` before it is answered."""

    wait_s: float = 0.6

    async def __call__(self, req: Request) -> Reply:
        if req.path.rstrip("/") == "/v1/chat/completions":
            await asyncio.sleep(self.wait_s)
        return await super().__call__(req)


def test_a_probe_sent_inside_a_running_audit_waits_in_the_queue_as_long_as_any_request(tmp_path, monkeypatch):
    # The pre-flight's short bound stands for an idle server; inside a run the other jobs' requests are
    # ahead of the probe, so it gets the endpoint's timeout_s (5 s here) and the request goes with its schema.
    monkeypatch.setattr(preflight, "COMPLETION_TIMEOUT_S", 0.2)
    server = BusyServer(honours=True)
    with ServerThread(server) as srv:
        answer, fingerprint = _ask(tmp_path, srv.base_url, "auto")
    assert fingerprint["structured_output"] == {"mode": "auto", "enabled": True}
    assert len(server.schema_bodies()) == 2  # the probe, then the request itself with its schema
    json.loads(answer)
