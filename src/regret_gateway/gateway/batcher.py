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

Load shedding: the batcher learns what a forward pass costs (seconds per work unit, a moving average;
a batch's units are its texts x its longest text's tokens, estimated at ~4 characters a token up to
``max_tokens``, plus a fixed overhead) and how long the busy event loop takes to hand a finished batch
back (a moving average too). Before queueing a text it predicts when its row would come back: the rest
of the batch in flight, the queued batches ahead of it and its own, each with one hop of the loop. Every
queued text has a deadline (when its caller's ``budget`` runs out); a new text is queued only if its row
would come back before its own deadline and before those of the texts already in the batch it would join
(a longer batch delays them too), with a margin learnt from how late queued rows came back (the 95th
percentile of the prediction's error). One that would not is first cut to ~``short_tokens`` of its tokens (its
head and tail under ``truncation``)
if that fits (the router reads less of it, at a small cost in routing quality,
docs/experiments/gateway-overhead.md); if not, it is not queued: :class:`Overloaded` is raised at once,
and the request goes to its fallback without waiting (cheap, never slow). A text that finds the encoder
idle is embedded at once: until the first batch is timed nothing is shed, and estimates made under
a burst cannot shed the traffic after it (each batch that runs refreshes them) -- unless it is measured
to overrun (below).

What the prediction misses -- CPU that other processes take -- is caught by what is measured: how late
queued rows really came back (the margin above, a quantile, so that a few outliers under a saturated
event loop do not shed an ordinary burst), and whether an idle batch came back in time. A text that finds the encoder
idle is shed when the last idle batch came back past its caller's deadline -- except one every ``PROBE_S``, twice
as rarely after each probe that overran too, up to ``PROBE_MAX_S``: its batch measures again, so the
traffic after a burst is embedded again within a second, and a sustained hog costs few wasted passes. A
text whose every caller has given up (past its timeout) is dropped before its batch runs: embedding it
would take CPU from the requests still waiting.

An encoder cheaper than that machinery (``inline``: the static encoder, a token-vector lookup and a mean,
~0.1-3 ms a prompt) embeds each text on the caller's event loop at once: no thread, no hops of a busy
loop to wait for, no batch, nothing to shed (``inlined`` counts them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from regret_gateway.truncation import DEFAULT_TRUNCATION, clip_chars

CHARS_PER_TOKEN = 4  # a rough count of a text's tokens before it is tokenised (English prose and code)
OVERHEAD_UNITS = 32  # a forward pass's fixed cost, in token-rows
RATE_WEIGHT = 0.3  # weight of the newest batch in the moving average of seconds per unit
MARGIN_QUANTILE, MARGIN_STEP = 0.95, 0.002  # the margin tracks this quantile of how late a queued row comes back
# while forward passes overrun the budget as measured, an idle encoder embeds one text per PROBE_S, and twice as
# rarely after each probe that overran too (up to PROBE_MAX_S): under a sustained hog, probes cost little CPU
PROBE_S, PROBE_MAX_S = 1.0, 16.0


class Overloaded(RuntimeError):
    """The text's predicted wait for its embedding is over the budget: it was not queued."""


class EmbeddingBatcher:
    def __init__(
        self,
        encode: Callable[[Sequence[str]], np.ndarray],
        *,
        max_batch: int = 32,
        cache_size: int = 0,
        max_tokens: int = 256,
        encode_busy: Callable[[Sequence[str]], np.ndarray] | None = None,
        inline: Callable[[], bool] | None = None,
        truncation: str = DEFAULT_TRUNCATION,
    ):
        if max_batch < 1:
            raise ValueError("`max_batch` must be >= 1")
        if cache_size < 0:
            raise ValueError("`cache_size` must be >= 0")
        self.encode = encode
        self.encode_busy = encode_busy or encode  # for a batch that starts right after another: under load
        # whether to embed on the caller's event loop now, without the worker thread, the batches or shedding: an
        # encoder cheaper than the two hops of the loop a thread costs (the static encoder: a lookup and a mean)
        self.inline = inline
        self.max_batch = max_batch
        self.cache_size = cache_size
        self.max_tokens = max_tokens
        self.truncation = truncation  # how a text shortened under overload is cut (truncation.py)
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        # (key, text, estimated tokens, deadline: when its first caller stops waiting, when its row was predicted
        # to come back, when it was queued) queued for the next batch
        self._pending: list[tuple[bytes, str, int, float, float, float]] = []
        self._waiters: dict[bytes, list[asyncio.Future]] = {}  # texts queued or being embedded: who waits for each
        self._busy = False
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="regret-gateway-encoder")
        # seconds per work unit, learnt from the timed batches: of a batch on an idle encoder, and of one that
        # started right after another (under load, encode_busy may run it with fewer threads)
        self._rates: dict[bool, float | None] = {False: None, True: None}
        self._lag_s = 0.0  # learnt too: how long a finished batch waits for the event loop to take it back
        self._margin_s = 0.0  # and how much later than predicted a row comes back (its 95th percentile)
        self._last_back = float("-inf")  # when the last batch came back
        self._idle_overran = False  # the last batch that found the encoder idle came back past its caller's deadline
        self._probe_s = PROBE_S  # how long an overrunning idle encoder waits before it embeds a text again
        self.abandoned = 0  # texts dropped before their batch ran: every caller had given up on them
        self.shed_idle = 0  # of the shed, texts that found the encoder idle (its last idle pass overran)
        self._inflight_units = 0
        self._inflight_started = 0.0
        self._inflight_busy = False
        self.batches = 0
        self.texts = 0
        self.cache_hits = 0
        self.shed = 0  # texts not queued: predicted to wait past their budget
        self.shortened = 0  # texts cut to short_tokens to fit their budget
        self.inlined = 0  # texts embedded on the caller's loop (``inline``)

    def tokens(self, text: str) -> int:
        """The estimated tokens the encoder reads of ``text`` (before tokenising it: ~4 characters a token)."""
        return min(self.max_tokens, len(text) // CHARS_PER_TOKEN + 2)

    @staticmethod
    def _units(n_texts: int, longest: int) -> int:
        return n_texts * longest + OVERHEAD_UNITS  # a batch is padded to its longest text

    def _predict(self, tokens: int, budget: float) -> tuple[float, float]:
        """(wait, slack) of a new text of ``tokens`` with ``budget`` seconds, were it queued now. ``wait``: the
        rest of the batch in flight, the queued batches ahead of it and its own, each with one hop of the loop.
        ``slack``: how much earlier than the earliest deadline it would meet -- its own, and those of the texts
        already in the batch it would join (a longer batch delays them too). 0 and ``budget`` until a batch
        has been timed."""
        busy_rate = self._rates[True] or self._rates[False]  # what the queued batches will run at
        if busy_rate is None:
            return 0.0, budget
        now = time.perf_counter()
        units, hops = 0.0, 1  # the caller's own row takes one more hop of the loop to reach it
        seconds = 0.0
        if self._busy:
            inflight_rate = self._rates[self._inflight_busy] or busy_rate
            seconds += max(0.0, self._inflight_units * inflight_rate - (now - self._inflight_started))
            hops += 1
        queued = [p[2] for p in self._pending] + [tokens]
        for start in range(0, len(queued), self.max_batch):
            chunk = queued[start : start + self.max_batch]
            units += self._units(len(chunk), max(chunk))
            hops += 1
        wait = seconds + units * busy_rate + hops * self._lag_s
        joined = self._pending[(len(queued) - 1) // self.max_batch * self.max_batch :]
        deadline = min([now + budget, *(p[3] for p in joined)])
        return wait, deadline - (now + wait)

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def _cached(self, key: bytes) -> np.ndarray | None:
        if (hit := self._cache.get(key)) is not None:
            self._cache.move_to_end(key)
            self.cache_hits += 1
        return hit

    async def embed(
        self, text: str, timeout: float | None = None, budget: float | None = None, short_tokens: int | None = None
    ) -> np.ndarray:
        """The (d,) embedding of ``text`` (read-only); raises what the encoder raised, TimeoutError past
        ``timeout`` seconds, or :class:`Overloaded` at once when its predicted wait is over ``budget``
        seconds -- unless ``short_tokens`` is set and the text cut to about that many tokens fits the budget:
        then that is embedded (counted in ``shortened``). A text already queued or being embedded (a
        concurrent duplicate: a retry, templated traffic) waits for that forward pass; a caller that gives
        up takes nobody with it."""
        key = self._key(text)
        if (hit := self._cached(key)) is not None:
            return hit
        if self.inline is not None and self.inline():
            row = np.array(self.encode([text])[0])
            row.flags.writeable = False
            self.inlined += 1
            self._remember(key, row)
            return row
        tokens = self.tokens(text)
        deadline = float("inf") if budget is None else time.perf_counter() + budget
        idle = not self._busy and not self._pending  # then it is embedded at once, unless measured to overrun
        due = float("inf")  # when its row is predicted to come back (not predicted: idle, or no budget)
        if key not in self._waiters and budget is not None and idle and self._overrunning():
            self.shed += 1
            self.shed_idle += 1
            raise Overloaded(f"the last forward pass on an idle encoder came back past its deadline, as measured; "
                             f"the next is in {self._probe_s:g} s")  # fmt: skip
        if key not in self._waiters and budget is not None and not idle:
            wait, slack = self._predict(tokens, budget)
            if slack < self._margin_s:
                short = clip_chars(text, short_tokens, self.truncation, CHARS_PER_TOKEN) if short_tokens else text
                cut = self._predict(self.tokens(short), budget) if len(short) < len(text) else (wait, slack)
                if cut[1] < self._margin_s:
                    self.shed += 1
                    raise Overloaded(f"the embedding would wait ~{wait:.3f} s: over the {budget:g} s budget, its own "
                                     "or that of the texts whose batch it would join")  # fmt: skip
                self.shortened += 1
                text, key, tokens, wait = short, self._key(short), self.tokens(short), cut[0]
                if (hit := self._cached(key)) is not None:
                    return hit
            due = time.perf_counter() + wait
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if (waiters := self._waiters.get(key)) is not None:
            waiters.append(fut)
        else:
            self._waiters[key] = [fut]
            self._pending.append((key, text, tokens, deadline, due, time.perf_counter()))
            if not self._busy:
                self._next(loop)
        if timeout is None:
            return await fut
        expiry = loop.call_later(timeout, _expire, fut, timeout)
        try:
            return await fut
        finally:
            expiry.cancel()

    def _remember(self, key: bytes, row: np.ndarray) -> None:
        if self.cache_size:
            self._cache[key] = row
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _overrunning(self) -> bool:
        """Whether a text that finds the encoder idle is shed: the last idle batch came back past its caller's
        deadline, as measured (whatever took the CPU), less than the probe interval ago. Past it one text is
        embedded all the same (twice as rarely after each probe that overran too): its batch measures again."""
        return self._idle_overran and time.perf_counter() - self._last_back < self._probe_s

    def _live(self, entry: tuple) -> bool:
        """Whether anyone still waits for this queued text (callers past their timeout have given up)."""
        waiters = self._waiters.get(entry[0], [])
        if any(not f.done() for f in waiters):
            return True
        self._waiters.pop(entry[0], None)
        self.abandoned += 1
        return False

    def _next(self, loop: asyncio.AbstractEventLoop, busy: bool = False) -> None:
        """Send the next batch of pending texts to the worker thread; its rows come back through :meth:`_done`.
        ``busy``: it starts right after another batch (a backlog): ``encode_busy`` runs it. Texts every caller
        has given up on are dropped first: embedding them would only take CPU from the rest."""
        self._pending = [p for p in self._pending if self._live(p)]
        if not self._pending:
            self._busy = False
            return
        batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
        self._busy = True
        self.batches += 1
        self.texts += len(batch)
        self._inflight_units = self._units(len(batch), max(b[2] for b in batch))
        self._inflight_started = time.perf_counter()
        self._inflight_busy = busy
        try:
            running = self._worker.submit(self._timed, [b[1] for b in batch], busy)
        except RuntimeError as exc:  # the batcher was closed: the batch fails like a forward pass that raised
            running = concurrent.futures.Future()
            running.set_exception(exc)
            self._done(loop, batch, running, busy)
            return

        def hand_back(f: concurrent.futures.Future) -> None:  # in the worker thread
            try:
                loop.call_soon_threadsafe(self._done, loop, batch, f, busy)
            except RuntimeError:  # the loop closed meanwhile, and with it every request that waited on it
                self._waiters.clear()
                self._pending.clear()
                self._busy = False

        running.add_done_callback(hand_back)

    def _timed(self, texts: list[str], busy: bool) -> tuple[np.ndarray, float, float]:
        """In the worker thread: the batch's embeddings, the forward pass's seconds and when it ended."""
        started = time.perf_counter()
        out = (self.encode_busy if busy else self.encode)(texts)
        ended = time.perf_counter()
        return out, ended - started, ended

    def _done(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[bytes, str, int, float, float, float]],
        result: concurrent.futures.Future,
        busy: bool = False,
    ) -> None:
        """On the loop: each waiter gets its row (or the encoder's error), then the next batch starts."""
        out, error = None, None
        try:
            out, seconds, ended = result.result()
            rate = seconds / self._units(len(batch), max(b[2] for b in batch))
            now = time.perf_counter()
            lag = max(0.0, now - ended)  # the loop's delay in taking the batch back
            old = self._rates[busy]
            self._rates[busy] = rate if old is None else (1 - RATE_WEIGHT) * old + RATE_WEIGHT * rate
            self._lag_s = (1 - RATE_WEIGHT) * self._lag_s + RATE_WEIGHT * lag
            back = now + self._lag_s  # when its callers will have their rows (one more hop)
            self._last_back = back
            if not busy:
                self._idle_overran = back > min(b[3] for b in batch)  # past its caller's deadline, as measured
                self._probe_s = min(PROBE_MAX_S, 2 * self._probe_s) if self._idle_overran else PROBE_S
            for *_, due, _queued in batch:
                if due != float("inf"):  # a quantile by stochastic approximation: up when later than it, else down
                    late = (back - due) > self._margin_s
                    self._margin_s = max(0.0, self._margin_s + MARGIN_STEP * (late - (1 - MARGIN_QUANTILE)))
        except Exception as exc:  # noqa: BLE001 - every waiter gets the error (and fails open)
            error = exc
        for i, (key, *_) in enumerate(batch):
            waiters = self._waiters.pop(key, [])
            if error is not None:
                for fut in waiters:
                    if not fut.done():
                        fut.set_exception(error)
                continue
            assert out is not None
            row = np.array(out[i])
            row.flags.writeable = False  # shared by every waiter and the cache: nobody may change it
            self._remember(key, row)
            for fut in waiters:
                if not fut.done():
                    fut.set_result(row)
        if self._pending:
            self._next(loop, busy=True)
        else:
            self._busy = False

    def close(self) -> None:
        """Stop the worker thread once its current batch is done (later requests fail, and fall back)."""
        self._worker.shutdown(wait=False)


def _expire(fut: asyncio.Future, timeout: float) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError(f"no embedding within {timeout:g} s"))
