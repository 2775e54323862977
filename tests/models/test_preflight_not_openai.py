"""A server that is not an OpenAI-compatible API at base_url, over real loopback HTTP: a 404 on ``/models``
stops the pre-flight as a base_url error naming the URL and the usual fix; a 501 or a 4xx is not retried,
and its HTML page is summarised on one line, with the field to check named."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evoaudit import config as config_mod
from evoaudit.agent.prompt import opening_messages
from evoaudit.models import preflight, server_errors
from evoaudit.models.base import ChatRequest
from evoaudit.models.http import Reply, Request, ServerThread
from evoaudit.models.openai_backend import EndpointError, OpenAIBackend

MODEL = "probe-model"


def _page(status: int, title: str) -> str:
    style = "body { font-family: sans-serif; }\n" * 40  # what a web server's error page carries
    return (
        f"<!DOCTYPE html>\n<html>\n<head><title>{status} {title}</title><style>{style}</style></head>\n"
        f"<body>\n<h1>{title}</h1>\n<p>The requested URL was not found on this server.</p>\n"
        "<hr><address>nginx/1.22.1</address>\n</body>\n</html>\n"
    )


@dataclass
class WebServer:
    """A web server on the port: ``/models`` and ``/chat/completions`` answer ``status`` with an HTML page,
    except the routes in ``api`` (``/v1/...``), which answer as an OpenAI-compatible server does."""

    status: int
    chat_status: int | None = None
    api: tuple[str, ...] = ()
    seen: list[str] = field(default_factory=list)

    async def __call__(self, req: Request) -> Reply:
        path = req.path.rstrip("/")
        self.seen.append(f"{req.method} {path}")
        html = {"content-type": "text/html"}
        if path in self.api and path.endswith("/models"):
            return Reply.json({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if path.endswith("/chat/completions") and self.chat_status is not None:
            return Reply(self.chat_status, _page(self.chat_status, "Not Implemented").encode(), html)
        return Reply(self.status, _page(self.status, "Not Found").encode(), html)


def _cfg(tmp_path: Path, base_url: str, **executor) -> config_mod.Config:
    ep = {
        "backend": "openai",
        "base_url": base_url,
        "model": MODEL,
        "timeout_s": 5,
        "max_retries": 5,
        "retry_backoff_s": 0.01,
        "retry_backoff_max_s": 0.02,
        "cache": False,
        "cache_path": str(tmp_path / "cache.sqlite"),
    }
    return config_mod.from_dict({"executor": ep | executor})


def test_a_404_on_models_is_a_base_url_error_naming_the_url_and_the_missing_v1(tmp_path):
    server = WebServer(404)
    with ServerThread(server) as srv:
        root = srv.base_url.removesuffix("/v1")  # the usual mistake: the server's root, without /v1
        with pytest.raises(preflight.PreflightError) as err:
            preflight.check(_cfg(tmp_path, root))
    msg = str(err.value)
    assert "executor.base_url" in msg and f"GET {root}/models" in msg, msg
    assert f"try base_url: {root}/v1" in msg, msg
    assert "404 Not Found" in msg and "<" not in msg and "\n" not in msg, msg
    assert server.seen == ["GET /models"]  # nothing else was asked of it


def test_a_404_under_v1_names_the_field_without_proposing_another_v1(tmp_path):
    with ServerThread(WebServer(404)) as srv:
        with pytest.raises(preflight.PreflightError) as err:
            preflight.check(_cfg(tmp_path, srv.base_url))
    msg = str(err.value)
    assert "executor.base_url" in msg and f"GET {srv.base_url}/models" in msg, msg
    assert "/v1/v1" not in msg and "another program" in msg, msg


def test_a_501_completion_is_not_retried_and_names_base_url(tmp_path, caplog):
    server = WebServer(404, chat_status=501, api=("/v1/models",))
    with ServerThread(server) as srv:
        with pytest.raises(preflight.PreflightError) as err:
            preflight.check(_cfg(tmp_path, srv.base_url))
    msg = str(err.value)
    assert server.seen.count("POST /v1/chat/completions") == 1, server.seen
    assert "HTTP 501" in msg and "501 Not Implemented" in msg and "check executor.base_url" in msg, msg
    assert "<" not in msg and "font-family" not in msg and len(msg) < 600, msg
    assert "asking again" not in caplog.text


@pytest.mark.parametrize("status", [501, 400, 404])
def test_the_backend_does_not_retry_a_501_or_a_4xx_and_trims_the_page(tmp_path, caplog, status):
    server = WebServer(404, chat_status=status, api=("/v1/models",))
    request = ChatRequest(messages=tuple(opening_messages("sys", "hello")), seed=1)
    with ServerThread(server) as srv:
        backend = OpenAIBackend(_cfg(tmp_path, srv.base_url, wire={"preflight": False}).executor)
        with pytest.raises(EndpointError) as err:
            asyncio.run(backend.complete(request))
    msg = str(err.value)
    assert server.seen.count("POST /v1/chat/completions") == 1, server.seen
    assert backend.retries == 0
    assert f"HTTP {status}" in msg and "check the base_url" in msg and "not retried" in msg, msg
    assert "<" not in msg and "font-family" not in msg, msg
    assert "font-family" not in caplog.text  # the log line is the same one-line summary


def test_status_classes_and_hints():
    assert server_errors.classify_status(501, None, "") == "fatal"
    assert server_errors.classify_status(502, None, "") == "retry"
    assert server_errors.classify_status(404, None, "") == "fatal"
    assert server_errors.classify_status(408, None, "") == "retry"
    assert server_errors.hint_field(401, "{}") == "api_key_env"
    # vLLM's answer for a model it does not serve is a JSON 404 naming the model.
    assert server_errors.hint_field(404, '{"message": "The model `x` does not exist."}') == "model"
    assert server_errors.hint_field(404, '{"error": {"message": "File Not Found"}}') == "base_url"
    assert server_errors.hint_field(400, '{"error": {"message": "bad field"}}') == "model and extra_body"
