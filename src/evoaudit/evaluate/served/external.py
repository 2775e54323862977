"""Your own agent as the executor of the workflow's episodes (``agent.external``).

Each episode serves its instance over MCP on 127.0.0.1 exactly as ``evoaudit serve --transport http`` does
(``server.http_servers``: the suite's own tools and runtime, the ``task`` and ``system`` prompts, the
control server), runs the configured command with the two URLs in its environment (and the episode's
seed, the one evoaudit's loop sends with each request), and waits for it to exit. The calls it made are
the episode: its messages are those the workflow's loop records for the same calls
(``score.episode_from_calls``), its terminal state is the served environment, and the runner then computes
the outcome with the evaluator's own ``compute_outcome``, as for any episode. The agent's final
answer is what it handed over with ``submit_answer``, else what it printed on stdout (stripped).

If the agent resets (fetches the ``task`` prompt again, or calls ``reset_episode``), the last episode is
the one recorded. An agent still running at ``agent.external.timeout_s`` is stopped (the episode records
``timer_hit``); one that exits with a non-zero status records the infrastructure failure
``external_agent_error`` with the end of its stderr, and is counted apart like any infrastructure failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

from evoaudit.agent.loop import Episode
from evoaudit.config import AgentConfig, SuiteConfig
from evoaudit.evaluate.served.instance import ServedInstance
from evoaudit.evaluate.served.score import episode_from_calls
from evoaudit.evaluate.served.server import EpisodeHost, http_servers
from evoaudit.models.server_errors import redact, trim
from evoaudit.records import Instance
from evoaudit.suite.interface import AuditSuite

URL_ENV = "EVOAUDIT_MCP_URL"
CONTROL_URL_ENV = "EVOAUDIT_MCP_CONTROL_URL"
SEED_ENV = "EVOAUDIT_SEED"
EXTERNAL_AGENT_ERROR = "external_agent_error"


async def run_external(
    backend: Any,
    system: str,
    instance: Instance,
    suite: AuditSuite,
    goal: str | None,
    injections: dict[str, str],
    suite_cfg: SuiteConfig | None = None,
    *,
    agent: AgentConfig | None = None,
    max_steps: int,
    seed: int | None,
    defense: Any = None,
    time_limit_s: float | None = None,
) -> tuple[Any, Any, Episode]:
    """One episode of ``instance`` run by the command of ``agent.external``: (pre-state, terminal state,
    episode), with ``agent.loop.run_instance``'s signature and result. The backend and step limit are the
    model's, which the agent brings itself; ``seed`` is handed to it (EVOAUDIT_SEED); the configuration
    refuses defences with it. The suite section is not read: the served instance opens its own tools."""
    if agent is None or not agent.external.command:
        raise ValueError("run_external needs the agent section with agent.external.command set")
    external = agent.external
    if defense is not None:
        raise ValueError(f"agent.external runs no defence; {defense.name!r} was asked for")
    served = ServedInstance(
        suite=suite,
        instance=instance,
        goal=goal,
        injections=dict(injections),
        system=system,
        condition=None,
        artifact_sha256=None,
        config_sha256="",
    )
    host = EpisodeHost(served)
    pre = suite.copy_environment(host.pristine)
    start = time.perf_counter()
    timer_hit, failure, stdout = False, None, ""
    async with http_servers(host) as urls:
        env = {**os.environ, URL_ENV: urls["tools"], CONTROL_URL_ENV: urls["control"]}
        if seed is not None:  # the seed evoaudit's loop would send with each request (executor.send_seed)
            env[SEED_ENV] = str(seed)
        proc = await asyncio.create_subprocess_exec(
            *external.command,
            env=env,
            cwd=external.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), external.timeout_s)
        except TimeoutError:
            timer_hit = True
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            out, err = await proc.communicate()
        stdout = out.decode("utf-8", "replace").strip()
        if not timer_hit and proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip()[-2000:]
            failure = trim(redact(f"{' '.join(external.command)} exited with {proc.returncode}: {tail}"))
    with host.lock:
        current = host.current
        answer = current.final_output if current.final_output is not None else stdout
        episode = episode_from_calls(system, served.prompt, current.calls, answer)
        terminal = host.env
    episode.timer_hit = timer_hit
    if failure is not None:
        episode.infra_failure, episode.infra_failure_detail = EXTERNAL_AGENT_ERROR, failure
    episode.wall_s = time.perf_counter() - start
    return pre, terminal, episode
