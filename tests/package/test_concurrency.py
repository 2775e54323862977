"""Independent calls at once: results in input order, at most ``limit`` in flight, the first error raised."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from evoaudit.concurrency import gather_ordered, map_ordered


def test_gather_keeps_input_order_when_calls_finish_in_reverse():
    async def slow_first(i: int) -> int:
        await asyncio.sleep(0.01 * (5 - i))
        return i * 10

    assert asyncio.run(gather_ordered(slow_first, range(5), limit=5)) == [0, 10, 20, 30, 40]


def test_gather_bounds_the_calls_in_flight():
    state = {"now": 0, "peak": 0}

    async def one(_: int) -> None:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.005)
        state["now"] -= 1

    asyncio.run(gather_ordered(one, range(20), limit=3))
    assert state["peak"] == 3


def test_gather_raises_the_failing_call_and_cancels_the_rest():
    finished = []

    async def one(i: int) -> int:
        if i == 2:
            raise KeyError("call 2")
        await asyncio.sleep(0.5)
        finished.append(i)
        return i

    with pytest.raises(KeyError, match="call 2"):
        asyncio.run(gather_ordered(one, range(6), limit=6))
    assert finished == []


def test_gather_of_nothing_and_a_bad_limit():
    async def one(i: int) -> int:
        return i

    assert asyncio.run(gather_ordered(one, [], limit=4)) == []
    with pytest.raises(ValueError, match="at least 1"):
        asyncio.run(gather_ordered(one, [1], limit=0))


def test_map_keeps_order_bounds_threads_and_raises():
    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def one(i: int) -> int:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.01 * (8 - i))
        with lock:
            state["now"] -= 1
        return -i

    assert map_ordered(one, range(8), limit=2) == [0, -1, -2, -3, -4, -5, -6, -7]
    assert state["peak"] == 2

    def bad(i: int) -> int:
        if i == 1:
            raise RuntimeError("shard 1")
        return i

    with pytest.raises(RuntimeError, match="shard 1"):
        map_ordered(bad, range(4), limit=4)
