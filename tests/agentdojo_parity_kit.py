"""AgentDojo's own runner and evoaudit's ``agentdojo`` profile on the same endpoint, one (user task,
injection task) pair at a time, with every chat request body either side sends logged by a loopback proxy.

Used by ``tests/suite/agentdojo/test_agentdojo_profile.py`` (a scripted server) and
``tests/suite/agentdojo/test_agentdojo_parity.py`` (llama-server);
by hand, ``python tests/agentdojo_parity_kit.py BASE_URL [PAIR ...] [--bodies FILE]`` prints
both sides' verdicts and request-body differences per pair (and writes every body and answer to FILE).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline, PipelineConfig
from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM
from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop
from agentdojo.attacks.attack_registry import load_attack
from agentdojo.benchmark import run_task_with_injection_tasks
from agentdojo.logging import Logger
from agentdojo.task_suite.load_suites import get_suite as agentdojo_suite

from evoaudit import config as config_mod
from evoaudit.agent.profile import configured_prompt
from evoaudit.evaluate.runner import EpisodeSpec, run_one
from evoaudit.models.openai_backend import OpenAIBackend
from evoaudit.records import Message
from evoaudit.suite.registry import get_suite

MODEL = "qwen2.5-coder-0.5b-instruct"
# A key of AgentDojo's MODEL_NAMES, so that its attack names the model as its benchmark script would
# ("Local model"); evoaudit's suite.attack.model_name is set to the same name.
PIPELINE_NAME = "local"


@dataclass
class Proxy:
    """A loopback HTTP proxy in front of ``upstream`` that logs each chat request body, tagged."""

    upstream: str
    tag: str = ""
    bodies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    answers: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    def record(self, body: bytes) -> None:
        self.bodies.setdefault(self.tag, []).append(json.loads(body))

    def answered(self, status: int, data: bytes) -> None:
        self.answers.setdefault(self.tag, []).append((status, data.decode("utf-8", "replace")))


@contextmanager
def logging_proxy(upstream: str) -> Iterator[tuple[str, Proxy]]:
    """Yields (the proxy's base URL, its log); ``upstream`` is a base URL ending in /v1."""
    proxy = Proxy(upstream.rstrip("/"))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _forward(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            path = self.path.removeprefix("/v1")
            chat = method == "POST" and path.endswith("/chat/completions") and body
            if chat:
                proxy.record(body)
            root = proxy.upstream.removesuffix("/v1")
            url = (proxy.upstream + path) if self.path.startswith("/v1") else (root + self.path)
            req = urllib.request.Request(url, data=body, method=method)
            req.add_header("Content-Type", self.headers.get("Content-Type") or "application/json")
            try:
                with urllib.request.urlopen(req, timeout=600) as resp:
                    status, data = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                status, data = exc.code, exc.read()
            if chat:
                proxy.answered(status, data)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._forward("GET")

        def do_POST(self) -> None:
            self._forward("POST")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", proxy
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def scripted_server(final_content: bool = True, first: Sequence[tuple[str, str]] = ()) -> Iterator[str]:
    """A loopback chat server that plays AgentDojo's ground-truth agent with native tool calls: it finds
    the user task by the request's user text, answers the task's next ground-truth call (arguments as
    JSON text, ids ``call_<n>``, content null) while fewer tool results than calls are in the request, then
    the task's ground-truth output. No sampling, so both runners meet the same answers to the same
    requests; the bodies themselves are compared through ``logging_proxy``. With ``final_content`` off
    the last answer has no content (``null``), which AgentDojo's runner answers by running the task again.
    ``first``: calls (name, arguments as the JSON text sent) answered before the plan's, one a turn (an
    unknown tool, a list-like string, arguments that are not JSON or not an object)."""
    suite = agentdojo_suite("v1.2.2", "banking")
    tasks = {t.PROMPT: t for t in suite.user_tasks.values()}

    def text(content: Any) -> str:
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return content or ""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        prompt = next(text(m["content"]) for m in messages if m["role"] == "user")
        task = tasks[prompt]
        plan = task.ground_truth(suite.load_and_inject_default_environment({}))
        done = sum(m["role"] == "tool" for m in messages)
        calls = [*first, *((c.function, json.dumps(dict(c.args))) for c in plan)]
        if done < len(calls):
            name, arguments = calls[done]
            msg = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{done}",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            output = (getattr(task, "GROUND_TRUTH_OUTPUT", "") or "Done.") if final_content else None
            msg = {"role": "assistant", "content": output}
            finish = "stop"
        return {
            "id": "scripted",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL,
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, data: dict[str, Any]) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path.endswith("/chat/completions"):
                self._send(200, answer(body))
            else:
                self._send(404, {"error": {"message": "not found"}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


class _TraceDir(Logger):
    """Gives AgentDojo's TraceLogger a log directory of our own (it would otherwise write its traces
    under the installed package) and keeps the console quiet."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = str(logdir)
        self.messages: list = []

    def log(self, messages: Any, **kwargs: Any) -> None:
        self.messages = list(messages)


def agentdojo_pipeline(base_url: str, max_steps: int) -> AgentPipeline:
    """AgentDojo's benchmark pipeline (``AgentPipeline.from_config``, no defense) on an OpenAI-compatible
    endpoint: its default system message, OpenAILLM at its default temperature 0, its tool loop with
    ``max_steps - 1`` iterations (model turns: 1 + iterations; AgentDojo's default is 15)."""
    llm = OpenAILLM(openai.OpenAI(api_key="EMPTY", base_url=base_url), MODEL)
    cfg = PipelineConfig(llm=llm, model_id=None, defense=None, system_message_name=None, system_message=None)
    pipeline = AgentPipeline.from_config(cfg)
    pipeline.name = PIPELINE_NAME
    loop = next(e for e in pipeline.elements if isinstance(e, ToolsExecutionLoop))
    loop.max_iters = max_steps - 1
    return pipeline


def run_agentdojo(base_url: str, user_task: str, goal: str, max_steps: int) -> tuple[bool, bool]:
    """AgentDojo's own benchmark function on one pair: (utility, security), security True = the injection
    task succeeded, as AgentDojo reports it. A server error it does not absorb (it absorbs only context
    overflows) propagates, as it stops AgentDojo's benchmark."""
    suite = agentdojo_suite("v1.2.2", "banking")
    pipeline = agentdojo_pipeline(base_url, max_steps)
    attack = load_attack("important_instructions", suite, pipeline)
    with tempfile.TemporaryDirectory(prefix="agentdojo-parity-") as logdir, _TraceDir(Path(logdir)):
        utility, security = run_task_with_injection_tasks(
            suite,
            pipeline,
            suite.get_user_task_by_id(user_task),
            attack,
            logdir=None,
            force_rerun=True,
            injection_tasks=[goal],
            benchmark_version="v1.2.2",
        )
    return utility[(user_task, goal)], security[(user_task, goal)]


def evoaudit_config(base_url: str, max_steps: int, profile: str = "agentdojo") -> config_mod.Config:
    return config_mod.from_dict(
        {
            "agent": {"profile": profile, "max_steps": max_steps},
            "suite": {"attack": {"user_name": "Emma Johnson", "model_name": "Local model"}},
            "executor": {
                "backend": "openai",
                "base_url": base_url,
                "model": MODEL,
                "temperature": 0.0,
                "timeout_s": 600,
                "concurrency": 1,
                "max_retries": 0,
                "cache": False,
            },
            "transfer": {"enabled": False},
        }
    )


def run_evoaudit(
    base_url: str, user_task: str, goal: str, max_steps: int, profile: str = "agentdojo"
) -> tuple[bool, bool, Any]:
    """evoaudit's static condition on one pair, through the runner's ``run_one``, on AgentDojo's own user
    task as an instance (``official`` predicate: AgentDojo's utility; attack success: its security)."""
    cfg = evoaudit_config(base_url, max_steps, profile)
    instance = get_suite("banking").official_instances([user_task])[0]
    spec = EpisodeSpec("parity", "static", "attacked", instance, goal)

    async def one() -> Any:
        backend = OpenAIBackend(cfg.executor, role="executor")
        try:
            return await run_one(cfg, backend, spec, configured_prompt(cfg), None)
        finally:
            await backend.aclose()

    rollout = asyncio.run(one())
    return bool(rollout.outcome.utility), bool(rollout.outcome.attack_success), rollout


def without_call_ids(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bodies with each tool-call id replaced by its order of first appearance (``id-0``, ...):
    llama-server draws a random id per call, which its chat template does not render."""
    names: dict[str, str] = {}

    def rename(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return names.setdefault(value, f"id-{len(names)}")

    out = []
    for body in bodies:
        body = json.loads(json.dumps(body))
        for m in body.get("messages", []):
            for tc in m.get("tool_calls") or []:
                tc["id"] = rename(tc.get("id"))
            if "tool_call_id" in m:
                m["tool_call_id"] = rename(m["tool_call_id"])
        out.append(body)
    return out


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values first differ (None when equal)."""
    if type(a) is not type(b):
        return f"{path or '.'}: {type(a).__name__} {a!r:.200} vs {type(b).__name__} {b!r:.200}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'second' if k not in a else 'first'}"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None if len(a) == len(b) else f"{path}: {len(a)} vs {len(b)} items"
    return None if a == b else f"{path}: {a!r:.300} vs {b!r:.300}"


def _post(url: str, body: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_healthy(upstream: str, timeout_s: float = 180) -> None:
    """Until llama-server's /health answers 200: it lists its model (and answers 503) while loading."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(upstream.removesuffix("/v1") + "/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{upstream}: /health did not answer 200 within {timeout_s:.0f} s")
        time.sleep(0.5)


def slot_snapshot(upstream: str, name: str = "parity-prefix.bin") -> Callable[[], None]:
    """llama-server's only slot, as it is after one request with the runners' common prefix (AgentDojo's
    system message and tools), saved to a file (the server needs ``--slot-save-path``); returns what restores
    it. Restored before each side of each pair, it makes both runners' requests meet the same cache: the
    numbers of a prompt computed from a different cached prefix differ in the last bits, and a greedy
    0.5B model's answer with them (it did, on an amount: 100000 against 1000000)."""
    root = upstream.removesuffix("/v1")
    profile = get_suite("banking").agent_profile("agentdojo")
    opening = [Message(role="system", content=profile.system_message), Message(role="user", content="Hello")]
    body = {
        "model": MODEL,
        "messages": [profile.wire_message(m) for m in opening],
        "tools": list(profile.tool_schemas()),
        "tool_choice": "auto",
        "max_tokens": 1,
    }
    _post(upstream + "/chat/completions", body)
    _post(root + "/slots/0?action=save", {"filename": name})

    def restore() -> None:
        _post(root + "/slots/0?action=restore", {"filename": name})

    return restore


def compare_pair(
    base: str,
    proxy: Proxy,
    user_task: str,
    goal: str,
    max_steps: int,
    reset: Callable[[], None] | None = None,
    random_ids: bool = False,
) -> dict[str, Any]:
    """Both runners on one pair, AgentDojo's first; ``reset`` (e.g. ``slot_snapshot``'s) runs before each.
    ``random_ids``: the server draws a random id per call (llama-server), so the bodies are compared with
    each id replaced by its order of first appearance; otherwise byte for byte, ids included."""
    if reset is not None:
        reset()
    proxy.tag = f"agentdojo/{user_task}/{goal}"
    try:
        a_u, a_s = run_agentdojo(base, user_task, goal, max_steps)
        agentdojo: dict[str, Any] = {"utility": a_u, "security": a_s}
    except openai.APIStatusError as exc:  # AgentDojo's benchmark stops here; no verdict for the pair
        agentdojo = {"raised": f"{exc.status_code}: {exc.message}"[:200]}
    except ValueError as exc:  # its client's json.loads / FunctionCall on arguments it cannot read
        agentdojo = {"raised": f"{type(exc).__name__}: {exc}"[:200]}
    if reset is not None:
        reset()
    proxy.tag = f"evoaudit/{user_task}/{goal}"
    e_u, e_s, rollout = run_evoaudit(base, user_task, goal, max_steps)
    evoaudit: dict[str, Any] = {"utility": e_u, "security": e_s}
    if rollout.outcome.infra_failure:
        evoaudit["infra_failure"] = rollout.outcome.infra_failure
    a_bodies = proxy.bodies.get(f"agentdojo/{user_task}/{goal}", [])
    e_bodies = proxy.bodies.get(f"evoaudit/{user_task}/{goal}", [])
    if random_ids:
        a_bodies, e_bodies = without_call_ids(a_bodies), without_call_ids(e_bodies)
    diffs = [first_difference(x, y) for x, y in zip(a_bodies, e_bodies, strict=False)]
    return {
        "pair": (user_task, goal),
        "agentdojo": agentdojo | {"requests": len(a_bodies)},
        "evoaudit": evoaudit | {"requests": len(e_bodies)},
        "body_diffs": [d for d in diffs if d],
        "calls": [c.function for c in rollout.calls],
        "final_output": rollout.final_output[:200],
        "rollout": rollout,
    }


if __name__ == "__main__":
    # python tests/agentdojo_parity_kit.py BASE_URL [user_task_N:injection_task_M ...] [--bodies FILE]
    # (PARITY_MAX_STEPS: model turns, default 3). Without a slot snapshot: for a server that is not
    # llama-server started with --slot-save-path; see tests/suite/agentdojo/test_agentdojo_parity.py for why
    # it matters.
    args = sys.argv[1:]
    bodies_file = None
    if "--bodies" in args:
        i = args.index("--bodies")
        bodies_file = Path(args[i + 1])
        del args[i : i + 2]
    upstream, *named = args
    pairs = [tuple(p.split(":")) for p in named] or [("user_task_0", "injection_task_0")]
    steps = int(os.environ.get("PARITY_MAX_STEPS", "3"))
    with logging_proxy(upstream) as (base, proxy):
        for user_task, goal in pairs:
            start = time.monotonic()
            result = compare_pair(base, proxy, user_task, goal, steps, random_ids=True)
            result.pop("rollout")
            print(json.dumps(result | {"s": round(time.monotonic() - start, 1)}), flush=True)
    if bodies_file is not None:
        bodies_file.write_text(json.dumps({"requests": proxy.bodies, "answers": proxy.answers}, indent=1))
