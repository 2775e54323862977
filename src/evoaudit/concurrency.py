"""Independent calls run at once, results kept in input order.

A job that waits on a model endpoint spends its time on latency, so calls that do not depend on each other
(the success judge over trajectories, ReasoningBank's distiller, SkillOpt's two reflections, the
determinism check's reruns) are issued together, at most ``limit`` in flight. Results come back in the
order of the inputs, never of completion, and callers fold them in that order, so a concurrent run writes
the same bytes as a serial one. The first exception cancels what is still running and is raised as is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def _check(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"concurrency limit must be at least 1, got {limit}")


async def gather_ordered(fn: Callable[[T], Awaitable[R]], items: Iterable[T], limit: int) -> list[R]:
    """``[await fn(x) for x in items]`` with at most ``limit`` calls in flight, in input order."""
    _check(limit)
    gate = asyncio.Semaphore(limit)

    async def one(item: T) -> R:
        async with gate:
            return await fn(item)

    tasks = [asyncio.ensure_future(one(x)) for x in items]
    if not tasks:
        return []
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:  # the earliest input that failed, so which error surfaces does not race
            if task in done and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return [t.result() for t in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def map_ordered(fn: Callable[[T], R], items: Iterable[T], limit: int) -> list[R]:
    """``[fn(x) for x in items]`` on at most ``limit`` threads, in input order; for blocking calls that
    each run their own event loop. On an exception, calls not yet started are dropped and it is raised."""
    _check(limit)
    work = list(items)
    if not work:
        return []
    with ThreadPoolExecutor(max_workers=min(limit, len(work))) as pool:
        futures = [pool.submit(fn, x) for x in work]
        wait(futures, return_when=FIRST_EXCEPTION)
        for f in futures:
            if f.done() and not f.cancelled() and f.exception() is not None:
                for g in futures:
                    g.cancel()
                raise f.exception()  # type: ignore[misc]
        return [f.result() for f in futures]
