"""Harness overhead: evoaudit's evaluator against AgentDojo's own benchmark loop, same scripted agent.

Both sides run the same scripted ground-truth agent (it replays each user task's ground-truth calls, then
gives the task's ground-truth answer) over Banking's 16 benign and 16 x 9 attacked episodes (AgentDojo also
runs each of the 9 injection tasks alone once, which counts as an episode of its own):

* AgentDojo: ``benchmark_suite_without_injections`` and ``benchmark_suite_with_injections`` with its trace
  logger writing every episode to a log directory;
* evoaudit: the evaluator's rollout runner (``run_specs``) with its records (one JSONL shard per arm,
  each rollout flushed as it ends, fsyncs grouped: ``evoaudit.jsonl``), outcome, exposure and state
  effects computed per rollout.

No model is involved, so the difference is the harness's own cost per episode. Target: ratio <= 0.25
(``TARGET_RATIO``; the evaluator costs at most a quarter of AgentDojo's runner per episode). Prints one
JSON object as its last line, {"agentdojo_ms_per_episode": A, "evoaudit_ms_per_episode": E, "ratio": E/A,
"target_ratio": 0.25, "load_average": L, ...}; ``--out`` also writes it (the recorded figures:
``benchmarks/output/harness_overhead.json``). Other work on the machine inflates both sides, unevenly: the
load average is printed with them.
Usage: python benchmarks/harness_overhead.py [--repeat N] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.benchmark import benchmark_suite_with_injections, benchmark_suite_without_injections
from agentdojo.functions_runtime import EmptyEnv, Env, FunctionsRuntime
from agentdojo.logging import Logger
from agentdojo.types import (
    ChatAssistantMessage,
    ChatMessage,
    ChatToolResultMessage,
    text_content_block_from_string,
)

from evoaudit import config as config_mod
from evoaudit.agent.prompt import system_prompt
from evoaudit.evaluate.runner import plan_episodes, run_specs
from evoaudit.models.base import ChatRequest, ChatResponse
from evoaudit.records import Message, ToolCall
from evoaudit.suite.agentdojo.banking import tasks as banking
from evoaudit.suite.agentdojo.banking.instances import official_instances

PIPELINE_NAME = "scripted-ground-truth"
# The goal: the evaluator's cost per episode at most this share of AgentDojo's own runner's.
TARGET_RATIO = 0.25


class TraceDir(Logger):
    """Gives AgentDojo's TraceLogger a log directory (it writes one JSON trace per episode there) without
    the console chat tables of its OutputLogger, which would dominate the timing."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = str(logdir)
        self.messages: list = []

    def log(self, messages, **kwargs) -> None:
        self.messages = list(messages)


_EMPTY_ENV = EmptyEnv()


class ScriptedPipeline(BasePipelineElement):
    """AgentDojo side: finds the user task by its prompt and runs its ground truth through the runtime."""

    name = PIPELINE_NAME

    def __init__(self, suite) -> None:
        # With injections, AgentDojo also runs each injection task alone (its goal as the prompt).
        self._by_prompt = {t.PROMPT: t for t in suite.user_tasks.values()}
        self._by_prompt |= {t.GOAL: t for t in suite.injection_tasks.values()}

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Env = _EMPTY_ENV,
        messages: Sequence[ChatMessage] = (),
        extra_args: dict | None = None,
    ) -> tuple[str, FunctionsRuntime, Env, Sequence[ChatMessage], dict]:
        task = self._by_prompt[query]
        new: list[ChatMessage] = []
        for call in task.ground_truth(env):
            new.append(
                ChatAssistantMessage(
                    role="assistant", tool_calls=[call], content=[text_content_block_from_string("")]
                )
            )
            result, error = runtime.run_function(env, call.function, call.args)
            new.append(
                ChatToolResultMessage(
                    role="tool",
                    content=[text_content_block_from_string(tool_result_to_str(result))],
                    tool_call=call,
                    tool_call_id=None,
                    error=error,
                )
            )
        answer = getattr(task, "GROUND_TRUTH_OUTPUT", "") or "Done."
        new.append(
            ChatAssistantMessage(
                role="assistant", content=[text_content_block_from_string(answer)], tool_calls=None
            )
        )
        return query, runtime, env, [*messages, *new], extra_args or {}


class ScriptedBackend:
    """evoaudit side: the same agent as a chat backend; the next ground-truth call, then the answer."""

    def __init__(self, instances) -> None:
        self._by_prompt = {i.prompt: i for i in instances}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        prompt = next(m.content for m in request.messages if m.role == "user")
        inst = self._by_prompt[prompt]
        done = sum(m.role == "tool" for m in request.messages)
        if done < len(inst.ground_truth):
            call = inst.ground_truth[done]
            tc = ToolCall(id=f"call_{done}", name=call.function, arguments=json.dumps(call.args))
            return ChatResponse(
                message=Message(role="assistant", tool_calls=[tc]), finish_reason="tool_calls"
            )
        task = banking.user_task(inst.family)
        answer = getattr(task, "GROUND_TRUTH_OUTPUT", "") or "Done."
        return ChatResponse(message=Message(role="assistant", content=answer), finish_reason="stop")

    def fingerprint(self) -> dict[str, Any]:
        return {"backend": "scripted", "model": PIPELINE_NAME}


def run_agentdojo(workdir: Path) -> tuple[int, float]:
    suite = banking.load_suite()
    pipeline = ScriptedPipeline(suite)
    attack = banking.make_attack("Emma Johnson", "AI assistant")
    logdir = workdir / "agentdojo"
    logdir.mkdir()
    start = time.perf_counter()
    with TraceDir(logdir):
        benign = benchmark_suite_without_injections(pipeline, suite, logdir, force_rerun=True)
        attacked = benchmark_suite_with_injections(
            pipeline, suite, attack, logdir, force_rerun=True, verbose=False
        )
    elapsed = time.perf_counter() - start
    traces = sum(1 for _ in logdir.rglob("*.json"))
    if traces < 160:
        raise RuntimeError(f"AgentDojo wrote {traces} traces under {logdir}, expected at least 160")
    episodes = (
        len(benign["utility_results"])
        + len(attacked["utility_results"])
        + len(attacked["injection_tasks_utility_results"])
    )
    return episodes, elapsed


def run_evoaudit(workdir: Path) -> tuple[int, float]:
    cfg = config_mod.from_dict({"lineages": ["L1"], "executor": {"concurrency": 1}})
    instances = official_instances()
    backend = ScriptedBackend(instances)
    goals = banking.injection_task_ids()
    system = system_prompt(cfg.agent.system_prompt)
    start = time.perf_counter()
    n = 0
    for arm in ("benign", "attacked"):
        specs = plan_episodes("L1", "static", arm, instances, goals)
        out = workdir / "evoaudit" / arm / "shard0.jsonl"
        n += len(asyncio.run(run_specs(cfg, backend, specs, system, None, out)))
    return n, time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs of each side; the fastest counts")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON object to this file")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    logging.disable(logging.WARNING)  # AgentDojo's per-task console output would dominate the timing
    a_best = e_best = float("inf")
    a_n = e_n = 0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="evoaudit-harness-") as tmp:
            a_n, a_s = run_agentdojo(Path(tmp))
            e_n, e_s = run_evoaudit(Path(tmp))
        a_best, e_best = min(a_best, a_s / a_n), min(e_best, e_s / e_n)
    result = {
        "agentdojo_episodes": a_n,
        "evoaudit_episodes": e_n,
        "agentdojo_ms_per_episode": round(a_best * 1000, 3),
        "evoaudit_ms_per_episode": round(e_best * 1000, 3),
        "ratio": round(e_best / a_best, 4),
        "target_ratio": TARGET_RATIO,
        "within_target": e_best / a_best <= TARGET_RATIO,
        "repeat": args.repeat,
        "load_average": round(load_before, 2),  # other work on the machine inflates both sides
    }
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
