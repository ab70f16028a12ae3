"""One computation for many askers (the savings report of ``GET /regret/report``): concurrent calls with
the same key share one computation, and computations run one at a time, so a burst of report requests on
a large store costs one report, not one each that all time out together."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """Per event loop: :meth:`run` joins the computation in flight for its key, or starts one that waits for
    the others to end -- at the call, before its result is awaited. A caller that gives up (its timeout)
    leaves the computation running for the callers after it: one that asks again meanwhile joins it, not a
    new one."""

    def __init__(self) -> None:
        self._flights: dict[Hashable, asyncio.Future[T]] = {}
        self._turn = asyncio.Lock()
        self.started = 0  # computations started (the rest of the calls joined one)

    def run(self, key: Hashable, compute: Callable[[], Awaitable[T]], timeout: float) -> Awaitable[T]:
        """The result of ``key``'s computation, to await (at most ``timeout`` seconds); called in the loop."""
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._in_turn(compute))
            self._flights[key] = flight
            self.started += 1
            flight.add_done_callback(lambda done: self._landed(key, done))
        return asyncio.wait_for(asyncio.shield(flight), timeout)

    async def _in_turn(self, compute: Callable[[], Awaitable[T]]) -> T:
        async with self._turn:
            return await compute()

    def _landed(self, key: Hashable, done: asyncio.Future[T]) -> None:
        if self._flights.get(key) is done:
            del self._flights[key]
        if not done.cancelled():
            done.exception()  # retrieved: every caller may have given up on it
