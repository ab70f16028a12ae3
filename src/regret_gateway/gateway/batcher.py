"""Micro-batching of concurrent embedding requests, without a fixed wait.

While no batch is being embedded, a request is embedded at once (no added latency at low load). While a
batch is in flight, arriving requests accumulate and go together as the next batch (up to
``max_batch``) as soon as the current one finishes: under load, one forward pass serves many requests.
The encoder runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import numpy as np


class EmbeddingBatcher:
    def __init__(self, encode: Callable[[Sequence[str]], np.ndarray], *, max_batch: int = 32):
        if max_batch < 1:
            raise ValueError("`max_batch` must be >= 1")
        self.encode = encode
        self.max_batch = max_batch
        self._pending: list[tuple[str, asyncio.Future]] = []
        self._busy = False
        self.batches = 0
        self.texts = 0

    async def embed(self, text: str) -> np.ndarray:
        """The (d,) embedding of ``text``; raises what the encoder raised."""
        fut = asyncio.get_running_loop().create_future()
        self._pending.append((text, fut))
        if not self._busy:
            self._busy = True
            asyncio.get_running_loop().create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
                await self._run(batch)
        finally:
            self._busy = False

    async def _run(self, batch: list[tuple[str, asyncio.Future]]) -> None:
        self.batches += 1
        self.texts += len(batch)
        try:
            out = await asyncio.get_running_loop().run_in_executor(None, self.encode, [t for t, _ in batch])
        except Exception as exc:  # noqa: BLE001 - every waiter gets the error (and fails open)
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (_, fut), row in zip(batch, out):
            if not fut.done():
                fut.set_result(row)
