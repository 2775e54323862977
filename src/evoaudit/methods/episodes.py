"""The evolve stage's episode runner (``protocol.EpisodeRunner``): executor episodes a method runs while it
evolves (SkillOpt's validation gate), run here with the configuration the method is not given.

A method hands over the system-prompt sections of its candidate state, the instances and one seed each; the
runner adds the sections to the configured system prompt, runs the agent loop on the executor endpoint
(at most ``executor.concurrency`` episodes at once, each seeded only when ``executor.send_seed``) and
scores each episode with its suite's checker.
"""

from __future__ import annotations

import asyncio
from typing import Any

from evoaudit.config import Config
from evoaudit.models.base import ChatBackend
from evoaudit.records import Instance


class StageEpisodes:
    """The ``EpisodeRunner`` of one evolve job, over the lineage's learning instances."""

    def __init__(self, cfg: Config, learning: list[Instance]) -> None:
        self._cfg = cfg
        self._learning = learning
        self._executor: ChatBackend | None = None
        self.validation_variants: tuple[str, ...] = tuple(cfg.roles.validation)

    def _backend(self) -> ChatBackend:
        # Built on first use: most methods run no episode, and their evolve job must not need the
        # executor endpoint (its key, its server).
        if self._executor is None:
            from evoaudit.models.factory import make_backend

            self._executor = make_backend(self._cfg, self._cfg.executor, self._learning)
        return self._executor

    async def utilities(
        self, sections: list[tuple[str, str]], instances: list[Instance], seeds: list[int]
    ) -> list[bool | None]:
        # Imported here: the agent loop and the suites are heavy, and a job that loads this module to
        # evolve a method without episodes must not pay for them.
        from evoaudit.agent.loop import run_instance
        from evoaudit.agent.profile import configured_prompt
        from evoaudit.suite.registry import get_suite

        cfg = self._cfg
        executor = self._backend()
        system = configured_prompt(cfg, sections)
        gate = asyncio.Semaphore(cfg.executor.concurrency)

        async def one(inst: Instance, seed: int) -> bool | None:
            suite = get_suite(inst.suite)
            async with gate:
                pre, env, ep = await run_instance(
                    executor,
                    system,
                    inst,
                    suite,
                    None,
                    {},
                    cfg.suite,
                    agent=cfg.agent,
                    max_steps=cfg.agent.max_steps,
                    seed=seed if cfg.executor.send_seed else None,
                )
            if ep.infra_failure is not None:
                return None
            return suite.check_utility(inst, ep.final_output, pre, env)

        return list(await asyncio.gather(*(one(i, s) for i, s in zip(instances, seeds, strict=True))))

    def fingerprint(self) -> dict[str, Any]:
        return self._backend().fingerprint()
