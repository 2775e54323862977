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


def test_a_timeout_then_the_servers_answer_records_the_answer():
    client, seen = _client(timeouts=2)
    probe = preflight.render_probe(client, _endpoint(retries=3), "")
    root = "http://127.0.0.1:9"
    assert probe["tried"] == [f"{root}/apply-template: HTTP 404", f"{root}/tokenize: HTTP 404"]
    assert seen == ["/apply-template"] * 3 + ["/tokenize"]


def test_timeouts_past_the_retries_are_recorded_as_such():
    client, _ = _client(timeouts=10)
    probe = preflight.render_probe(client, _endpoint(retries=1), "")
    assert probe["tried"][0] == "http://127.0.0.1:9/apply-template: ReadTimeout"
