"""Micro-batching of concurrent embedding requests, without a fixed wait.

While no batch is being embedded, a request is embedded at once (no added latency at low load). While a
batch is in flight, arriving requests accumulate and go together as the next batch (up to
``max_batch``) as soon as the current one finishes: under load, one forward pass serves many requests.
The encoder runs in a worker thread, off the event loop. Concurrent requests for the same text share one
forward pass.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np


class EmbeddingBatcher:
    def __init__(self, encode: Callable[[Sequence[str]], np.ndarray], *, max_batch: int = 32, cache_size: int = 0):
        if max_batch < 1:
            raise ValueError("`max_batch` must be >= 1")
        if cache_size < 0:
            raise ValueError("`cache_size` must be >= 0")
        self.encode = encode
        self.max_batch = max_batch
        self.cache_size = cache_size
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._pending: list[tuple[bytes, str, asyncio.Future]] = []  # (key, text, future)
        self._inflight: dict[bytes, asyncio.Future] = {}  # texts queued or being embedded: asked again, shared
        self._busy = False
        self.batches = 0
        self.texts = 0
        self.cache_hits = 0

    async def embed(self, text: str) -> np.ndarray:
        """The (d,) embedding of ``text`` (read-only); raises what the encoder raised. A text already queued
        or being embedded (a concurrent duplicate: a retry, templated traffic) waits for that forward pass."""
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if (hit := self._cache.get(key)) is not None:
            self._cache.move_to_end(key)
            self.cache_hits += 1
            return hit
        # shielded: a caller that gives up (the hook's route_timeout_s) must not cancel the others' result
        return await asyncio.shield(self._submit(key, text))

    def _submit(self, key: bytes, text: str) -> asyncio.Future:
        fut = self._inflight.get(key)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._inflight[key] = fut
            self._pending.append((key, text, fut))
            if not self._busy:
                self._busy = True
                asyncio.get_running_loop().create_task(self._drain())
        return fut

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
                await self._run(batch)
        finally:
            self._busy = False

    async def _run(self, batch: list[tuple[bytes, str, asyncio.Future]]) -> None:
        self.batches += 1
        self.texts += len(batch)
        try:
            out = await asyncio.get_running_loop().run_in_executor(None, self.encode, [t for _, t, _ in batch])
        except Exception as exc:  # noqa: BLE001 - every waiter gets the error (and fails open)
            for key, _, fut in batch:
                self._inflight.pop(key, None)
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (key, _, fut), row in zip(batch, out):
            self._inflight.pop(key, None)
            row = np.array(row)
            row.flags.writeable = False  # shared by every waiter and the cache: nobody may change it
            if self.cache_size:
                self._cache[key] = row
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            if not fut.done():
                fut.set_result(row)
