"""A transport error while probing the template is retried: the probe's answer goes into every rollout's
fingerprint, so a moment of server overload must not be recorded in place of the server's answer."""

from __future__ import annotations

import httpx

from evoaudit import config as config_mod
from evoaudit.models import preflight


def _endpoint(retries: int) -> config_mod.EndpointConfig:
    cfg = config_mod.from_dict(
        {
            "executor": {
                "backend": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "max_retries": retries,
                "retry_backoff_s": 0.001,
            }
        },
        "test",
    )
    return cfg.executor


def _client(timeouts: int) -> tuple[httpx.Client, list[str]]:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if len(seen) <= timeouts:
            raise httpx.ReadTimeout("overloaded", request=request)
        return httpx.Response(404)

    return httpx.Client(transport=httpx.MockTransport(handle)), seen


def test_a_timeout_then_the_servers_answer_records_the_answer(caplog):
    client, seen = _client(timeouts=2)
    with caplog.at_level("INFO", logger="evoaudit.models.preflight"):
        probe = preflight.render_probe(client, _endpoint(retries=3), "")
    root = "http://127.0.0.1:9"
    assert f"{root}/apply-template: HTTP 404; {root}/tokenize: HTTP 404" in caplog.text
    assert seen == ["/apply-template"] * 3 + ["/tokenize"]
    assert probe == {"via": "client-side", **dict.fromkeys(preflight.CANARIES)}


def test_timeouts_past_the_retries_are_logged_and_the_record_is_the_same_as_for_no_render_endpoint(caplog):
    client, _ = _client(timeouts=10)
    with caplog.at_level("INFO", logger="evoaudit.models.preflight"):
        overloaded = preflight.render_probe(client, _endpoint(retries=1), "")
    assert "http://127.0.0.1:9/apply-template: ReadTimeout" in caplog.text
    # A rerun whose probe met a 404 records the same bytes (the determinism check compares records).
    answered = preflight.render_probe(_client(timeouts=0)[0], _endpoint(retries=1), "")
    assert overloaded == answered
