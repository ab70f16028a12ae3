"""`GET /regret/report` on a large store: concurrent requests share one report, reports run one at a time,
and a request that gave up leaves the report running for the next one to join."""

from __future__ import annotations

import asyncio

import pytest

from regret_gateway.gateway.single_flight import SingleFlight


def test_concurrent_callers_share_one_computation_and_other_keys_wait_their_turn():
    async def scenario():
        flights: SingleFlight[str] = SingleFlight()
        release = {30: asyncio.Event(), 7: asyncio.Event()}
        running: list[int] = []

        def compute(days):
            async def go():
                running.append(days)
                await release[days].wait()
                return f"report of {days} days"

            return go

        same = [asyncio.create_task(flights.run(30, compute(30), timeout=60)) for _ in range(3)]
        other = asyncio.create_task(flights.run(7, compute(7), timeout=60))
        while not running:
            await asyncio.sleep(0)
        for _ in range(20):
            await asyncio.sleep(0)
        assert running == [30]  # the 7-day report waits for the 30-day one
        release[30].set()
        assert await asyncio.gather(*same) == ["report of 30 days"] * 3
        release[7].set()
        assert await other == "report of 7 days"
        assert running == [30, 7] and flights.started == 2

    asyncio.run(scenario())


def test_a_caller_that_times_out_leaves_the_computation_for_the_next_caller_to_join():
    async def scenario():
        flights: SingleFlight[str] = SingleFlight()
        release, calls = asyncio.Event(), []

        async def compute():
            calls.append(1)
            await release.wait()
            return "page"

        with pytest.raises(asyncio.TimeoutError):
            await flights.run(30, compute, timeout=0.01)
        later = asyncio.create_task(flights.run(30, compute, timeout=60))
        await asyncio.sleep(0)
        release.set()
        assert await later == "page" and len(calls) == 1 and flights.started == 1
        # once landed, the next request computes afresh (a failure is not kept either)

        async def broken():
            raise RuntimeError("database gone")

        with pytest.raises(RuntimeError, match="database gone"):
            await flights.run(30, broken, timeout=60)
        assert await flights.run(30, compute, timeout=60) == "page" and flights.started == 3

    asyncio.run(scenario())
