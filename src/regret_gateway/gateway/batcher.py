"""Micro-batching of concurrent embedding requests, without a fixed wait.

While no batch is being embedded, a request is embedded at once (no added latency at low load). While a
batch is in flight, arriving requests accumulate and go together as the next batch (up to
``max_batch``) as soon as the current one finishes: under load, one forward pass serves many requests.
The encoder runs in the batcher's own worker thread, off the event loop and out of the loop's default
executor (which LiteLLM fills with its own calls under load). Concurrent requests for the same text share
one forward pass.

A batch hands its rows back with one callback on the event loop, straight to each caller's future: no
task or shield between the forward pass and the request, each of whose hops waits its turn behind
whatever else the proxy's loop has queued.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
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
        self._pending: list[tuple[bytes, str]] = []  # (key, text) waiting for the next batch
        self._waiters: dict[bytes, list[asyncio.Future]] = {}  # texts queued or being embedded: who waits for each
        self._busy = False
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="regret-gateway-encoder")
        self.batches = 0
        self.texts = 0
        self.cache_hits = 0

    async def embed(self, text: str, timeout: float | None = None) -> np.ndarray:
        """The (d,) embedding of ``text`` (read-only); raises what the encoder raised, or TimeoutError past
        ``timeout`` seconds. A text already queued or being embedded (a concurrent duplicate: a retry,
        templated traffic) waits for that forward pass; a caller that gives up takes nobody with it."""
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if (hit := self._cache.get(key)) is not None:
            self._cache.move_to_end(key)
            self.cache_hits += 1
            return hit
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if (waiters := self._waiters.get(key)) is not None:
            waiters.append(fut)
        else:
            self._waiters[key] = [fut]
            self._pending.append((key, text))
            if not self._busy:
                self._next(loop)
        if timeout is None:
            return await fut
        expiry = loop.call_later(timeout, _expire, fut, timeout)
        try:
            return await fut
        finally:
            expiry.cancel()

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send the next batch of pending texts to the worker thread; its rows come back through :meth:`_done`."""
        batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
        self._busy = True
        self.batches += 1
        self.texts += len(batch)
        try:
            running = self._worker.submit(self.encode, [t for _, t in batch])
        except RuntimeError as exc:  # the batcher was closed: the batch fails like a forward pass that raised
            running = concurrent.futures.Future()
            running.set_exception(exc)
            self._done(loop, batch, running)
            return

        def hand_back(f: concurrent.futures.Future) -> None:  # in the worker thread
            try:
                loop.call_soon_threadsafe(self._done, loop, batch, f)
            except RuntimeError:  # the loop closed meanwhile, and with it every request that waited on it
                self._waiters.clear()
                self._pending.clear()
                self._busy = False

        running.add_done_callback(hand_back)

    def _done(self, loop: asyncio.AbstractEventLoop, batch: list[tuple[bytes, str]], result: concurrent.futures.Future) -> None:
        """On the loop: each waiter gets its row (or the encoder's error), then the next batch starts."""
        out, error = None, None
        try:
            out = result.result()
        except Exception as exc:  # noqa: BLE001 - every waiter gets the error (and fails open)
            error = exc
        for i, (key, _) in enumerate(batch):
            waiters = self._waiters.pop(key, [])
            if error is not None:
                for fut in waiters:
                    if not fut.done():
                        fut.set_exception(error)
                continue
            assert out is not None
            row = np.array(out[i])
            row.flags.writeable = False  # shared by every waiter and the cache: nobody may change it
            if self.cache_size:
                self._cache[key] = row
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            for fut in waiters:
                if not fut.done():
                    fut.set_result(row)
        if self._pending:
            self._next(loop)
        else:
            self._busy = False

    def close(self) -> None:
        """Stop the worker thread once its current batch is done (later requests fail, and fall back)."""
        self._worker.shutdown(wait=False)


def _expire(fut: asyncio.Future, timeout: float) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError(f"no embedding within {timeout:g} s"))
