"""Micro-batching of concurrent embedding requests: requests that arrive within ``max_wait_ms`` of each
other (up to ``max_batch``) are embedded in one forward pass, off the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import numpy as np


class EmbeddingBatcher:
    def __init__(self, encode: Callable[[Sequence[str]], np.ndarray], *, max_batch: int = 32, max_wait_ms: float = 5.0):
        if max_batch < 1 or max_wait_ms < 0:
            raise ValueError("`max_batch` must be >= 1 and `max_wait_ms` >= 0")
        self.encode = encode
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self._pending: list[tuple[str, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self.batches = 0
        self.texts = 0

    async def embed(self, text: str) -> np.ndarray:
        """The (d,) embedding of ``text``; raises what the encoder raised."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append((text, fut))
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.max_wait_s, self._flush)
        return await fut

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            asyncio.get_running_loop().create_task(self._run(batch))

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
