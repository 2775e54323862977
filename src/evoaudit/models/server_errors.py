"""What a server said when it refused a request, in words a user can act on.

Error bodies go into the job log and into the rollout's infrastructure-failure record, trimmed and with
anything that looks like a credential removed. A 500 that comes back byte for byte on a byte-identical
request is a rejection of that request (a server-side validation error, such as llama-cpp-python's
``Input should be a valid string`` for ``content: null``), not a transient fault worth every retry.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import time
from typing import Any

MAX_DETAIL = 600

_SECRETS = (
    re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"\b(sk-|hf_|gsk_|xai-|AIza)[A-Za-z0-9._-]{6,}"),
    re.compile(r"(?i)((?:api[_-]?key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
    re.compile(r"(?<=://)[^/@\s:]+:[^/@\s]+(?=@)"),  # user:password in a URL
)


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    for pattern in _SECRETS:
        text = pattern.sub(lambda m: (m.group(1) if m.re.groups else "") + "[redacted]", text)
    return text


def trim(text: str, limit: int = MAX_DETAIL) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def body_text(response: Any) -> str:
    """The body of an httpx response, or '' when it cannot be read any more."""
    try:
        return response.text or ""
    except Exception:  # a streamed body already closed: there is nothing more to say
        return ""


MAX_PAGE_DETAIL = 160  # an HTML error page is summarised by its title, never dumped

_TAG = re.compile(r"<[^>]*>")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_PAGE_MARKS = ("<!doctype html", "<html", "<head", "<body", "<title")
_NOISE = re.compile(r"<(script|style|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)


def is_html(body: str) -> bool:
    """An HTML page (a web server's or a proxy's error page), not an API's answer."""
    head = body.lstrip()[:512].lower()
    return head.startswith("<") and any(t in head for t in _PAGE_MARKS)


def page_summary(body: str) -> str:
    """One line for an HTML page: its title, else its first text, trimmed."""
    match = _TITLE.search(body)
    text = match.group(1) if match else _TAG.sub(" ", _NOISE.sub(" ", body))
    text = text.replace("&nbsp;", " ").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return trim(text, MAX_PAGE_DETAIL) or "no text"


def detail(status: int, body: str, secrets: tuple[str, ...] = ()) -> str:
    """``HTTP <status>: <the server's message>``, the message taken from an OpenAI-style error body
    when there is one, an HTML page summarised by its title, else the raw body; on one line, trimmed and
    redacted."""
    if is_html(body):
        return f"HTTP {status}: an HTML page, not an API answer ({redact(page_summary(body), secrets)!r})"
    message = body
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            message = str(err.get("message") or err.get("detail") or body)
        elif isinstance(err, str):
            message = err
        elif "detail" in data:
            message = json.dumps(data["detail"])
    return f"HTTP {status}: {trim(redact(message, secrets))}"


def connection_detail(exc: BaseException, base_url: str) -> str:
    """Why no answer came: a refused connection names itself and the URL, so the fix is obvious."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    text = " | ".join(f"{type(e).__name__}: {e}" for e in chain)
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "refused" in text.lower():
        return f"connection refused by {redact(base_url)} (is the server running and listening there?)"
    if any("timeout" in type(e).__name__.lower() for e in chain):
        return f"no answer from {redact(base_url)} within the timeout ({type(chain[-1]).__name__})"
    return f"cannot reach {redact(base_url)}: {trim(redact(text), 300)}"


class RepeatedRejection:
    """Remembers the last 500 per request body; the same body answered with the same 500 twice is a
    rejection. One instance per request (the retry loop of one ``complete`` call)."""

    def __init__(self, request_body: dict[str, Any]) -> None:
        self._body = request_body
        self._request: str | None = None  # hashed on the first 500 only: most requests never see one
        self._last: str | None = None
        self.confirmed = False  # a 500 has repeated: the request is rejected

    def repeated(self, status: int, body: str) -> bool:
        if status != 500:
            self._last = None
            return False
        if self._request is None:
            self._request = hashlib.sha256(json.dumps(self._body, sort_keys=True).encode()).hexdigest()
        fingerprint = f"{self._request}:{hashlib.sha256(body.encode()).hexdigest()}"
        same = fingerprint == self._last
        self._last = fingerprint
        self.confirmed = self.confirmed or same
        return same


# Markers of a provider's guardrail or content filter, and of a prompt longer than the context window,
# in an error's code or message (OpenAI, Azure, vLLM, SGLang, llama.cpp and Ollama phrase them so).
_GUARDRAIL = re.compile(
    r"content[_ ]?(filter|policy|management)|guardrail|safety (system|policy)|flagged|moderation|"
    r"responsible ?ai",
    re.IGNORECASE,
)
_CONTEXT = re.compile(
    r"context[_ ]length|maximum context|context window|too many tokens|prompt is too long|"
    r"exceeds? the (model'?s? )?(max|context)|input (is )?too long",
    re.IGNORECASE,
)


# Statuses a retry cannot change: the server has no such route or method (501 Not Implemented, 505).
NOT_RETRIED_5XX = (501, 505)


def classify_status(status: int, code: str | None, message: str) -> str:
    """'retry', an InfraFailure kind, or 'fatal' for an HTTP error response. A 4xx other than 408, 409,
    425 and 429 is the request's or the configuration's fault, as are 501 and 505: none is retried."""
    text = f"{code or ''} {message}"
    if status in NOT_RETRIED_5XX:
        return "fatal"
    if status in (408, 409, 425, 429) or status >= 500:
        # A provider may also send its content filter as a 5xx; look at the text first.
        if _GUARDRAIL.search(text) and status != 429:
            return "guardrail_rejection"
        return "retry"
    if _GUARDRAIL.search(text):
        return "guardrail_rejection"
    if status == 413 or _CONTEXT.search(text):
        return "context_overflow"
    return "fatal"


def hint_field(status: int, body: str) -> str:
    """The endpoint field (under the role: ``executor.<field>``) a refused request most likely points at."""
    if status in (401, 403):
        return "api_key_env"
    no_route = status in (404, 405, 501, 505)
    if is_html(body) or (no_route and "model" not in body.lower()):
        # A web server's page, or a route the server does not have: the API is not where base_url points.
        return "base_url"
    if status == 404:
        return "model"  # an OpenAI-style 404 naming the model: the server does not serve it
    return "model and extra_body"


def base_url_fix(base_url: str) -> str:
    """What to try when no OpenAI-compatible API answers under ``base_url``."""
    base = redact(base_url.rstrip("/"))
    if not base.endswith("/v1"):
        return (
            f"most OpenAI-compatible servers (vLLM, SGLang, llama.cpp, Ollama, LiteLLM) serve it under /v1: "
            f"try base_url: {base}/v1"
        )
    return (
        f"check the server's address and port, and the path it serves the OpenAI API under (usually /v1, "
        f"as here: is another program listening at {base}?)"
    )


def retry_after_s(headers: Any) -> float | None:
    """Seconds a server asked us to wait (``retry-after-ms``, ``retry-after`` as seconds or a date)."""
    if headers is None:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unparseable: fall back to our own backoff
    return max(0.0, when.timestamp() - time.time())
