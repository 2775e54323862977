"""An identical request answered twice, differently (two jobs, or two episodes of one job, that sent it at
once): the first answer stored is the one every caller records, so a rerun from the cache agrees."""

from __future__ import annotations

import asyncio

from evoaudit import config as config_mod
from evoaudit.models.base import ChatRequest, ChatResponse
from evoaudit.models.cache import ResponseCache
from evoaudit.models.http import Reply, Request, ServerThread
from evoaudit.models.openai_backend import OpenAIBackend
from evoaudit.models.wire import completion_json
from evoaudit.records import Message


def test_the_first_answer_stored_under_a_key_is_what_every_later_writer_gets_back(tmp_path):
    first, second = ResponseCache(tmp_path / "c.sqlite"), ResponseCache(tmp_path / "c.sqlite")
    assert first.put("k", "u", "m", {"answer": 1}, {"server_version": "a"}) == {"answer": 1}
    assert second.put("k", "u", "m", {"answer": 2}, {"server_version": "a"}) == {"answer": 1}
    assert second.get("k") == ({"answer": 1}, {"server_version": "a"})
    assert (first.stats.writes, second.stats.writes) == (1, 0)


def test_an_entry_another_server_build_answered_is_replaced_not_kept(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", "u", "m", {"answer": 1}, {"server_version": "old"})
    stale = lambda fp: fp["server_version"] != "new"  # noqa: E731
    assert cache.put("k", "u", "m", {"answer": 2}, {"server_version": "new"}, stale=stale) == {"answer": 2}
    assert cache.get("k") == ({"answer": 2}, {"server_version": "new"})


def _answer(text: str) -> Reply:
    response = ChatResponse(message=Message(role="assistant", content=text), finish_reason="stop")
    return Reply.json(completion_json(response, "m", "chatcmpl-1"))


def test_a_request_answered_first_by_another_job_records_that_answer_over_http(tmp_path):
    cache_path = tmp_path / "cache.sqlite"
    request = ChatRequest(messages=(Message(role="user", content="hello"),), seed=7)
    state: dict[str, object] = {}

    async def server(req: Request) -> Reply:
        if req.path.rstrip("/") == "/v1/models":
            return Reply.json({"object": "list", "data": [{"id": "m", "object": "model"}]})
        if req.path.rstrip("/") != "/v1/chat/completions":
            return Reply.error(404, "no route", "not_found")
        # While this request is in flight another job, sent the same request, stores its answer first.
        other = ResponseCache(cache_path)
        other.put(state["key"], "u", "m", state["theirs"], state["fingerprint"])
        other.close()
        return _answer("ours")

    with ServerThread(server, max_requests=20) as srv:
        cfg = config_mod.from_dict(
            {
                "executor": {
                    "backend": "openai",
                    "base_url": srv.base_url,
                    "model": "m",
                    "timeout_s": 2,
                    "cache": True,
                    "cache_path": str(cache_path),
                }
            }
        )
        backend = OpenAIBackend(cfg.executor)
        state["key"] = backend.cache_key(backend.request_body(request))
        state["fingerprint"] = {"model": "m", "served_models": ["m"], "server_version": None}
        theirs = ChatResponse(message=Message(role="assistant", content="theirs"), finish_reason="stop")
        state["theirs"] = theirs.model_dump(mode="json", exclude={"cached"})

        async def go() -> ChatResponse:
            try:
                return await backend.complete(request)
            finally:
                await backend.aclose()

        live = asyncio.run(go())
    assert live.message.content == "theirs" and not live.cached
    rerun = OpenAIBackend(cfg.executor)
    again = asyncio.run(rerun.complete(request))
    assert again.message.content == "theirs" and again.cached


def test_a_write_the_database_refuses_reports_its_own_error_not_a_failed_rollback(tmp_path):
    from evoaudit.models.cache import CacheError

    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k0", "u", "m", {"answer": 0}, {})
    cache._db.execute("PRAGMA max_page_count = 1")  # the file cannot grow: as a full disk
    try:
        cache.put("k1", "u", "m", {"answer": "x" * 100_000}, {})
    except CacheError as exc:
        assert "full" in str(exc) and "rollback" not in str(exc)
    else:
        raise AssertionError("a write past the database's size limit was accepted")
