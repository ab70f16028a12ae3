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
        started = asyncio.Event()
        log: list[tuple[str, int]] = []

        def compute(days):
            async def go():
                log.append(("start", days))
                started.set()
                await release[days].wait()
                log.append(("end", days))
                return f"report of {days} days"

            return go

        same = [flights.run(30, compute(30), timeout=60) for _ in range(3)]  # joined at the call: one computation
        other = flights.run(7, compute(7), timeout=60)
        await started.wait()
        release[7].set()  # were the 7-day report not waiting its turn, it would start and end before the 30-day one
        release[30].set()
        assert await asyncio.gather(*same) == ["report of 30 days"] * 3
        assert await other == "report of 7 days"
        assert log == [("start", 30), ("end", 30), ("start", 7), ("end", 7)] and flights.started == 2

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
        later = flights.run(30, compute, timeout=60)  # joins the computation still in flight
        release.set()
        assert await later == "page" and len(calls) == 1 and flights.started == 1
        # once landed, the next request computes afresh (a failure is not kept either)

        async def broken():
            raise RuntimeError("database gone")

        with pytest.raises(RuntimeError, match="database gone"):
            await flights.run(30, broken, timeout=60)
        assert await flights.run(30, compute, timeout=60) == "page" and flights.started == 3

    asyncio.run(scenario())
