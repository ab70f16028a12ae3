"""Micro-batching: one call at low load, shared forward passes under load, results to the right caller."""

import asyncio
import concurrent.futures
import threading
import time

import numpy as np
import pytest

from regret_gateway.gateway.batcher import EmbeddingBatcher


async def until(condition, steps: int = 10_000) -> None:
    """Let the event loop run the tasks this test started until ``condition()`` holds -- the state the test
    needs them in (a text in flight, one queued). Each step is one pass of the event loop (``sleep(0)``
    yields, it does not wait on the clock); a state never reached fails after ``steps`` passes with the
    condition named, instead of hanging until the test's timeout."""
    for _ in range(steps):
        if condition():
            return
        await asyncio.sleep(0)  # yield one event-loop pass to the tasks under test
    raise AssertionError(f"the batcher never reached {condition.__name__} in {steps} event-loop passes")


def in_flight(batcher, text: str) -> bool:
    """``text`` is in the batch the encoder is running (not queued behind it)."""
    key = batcher._key(text)
    return batcher._busy and key in batcher._waiters and all(p[0] != key for p in batcher._pending)


def is_queued(batcher, text: str) -> bool:
    """``text`` waits for the next batch."""
    return any(p[1] == text for p in batcher._pending)


def slow_encoder(calls):
    def encode(texts):
        calls.append(list(texts))
        time.sleep(0.02)
        return np.array([[float(t.split("-")[1])] for t in texts])

    return encode


def test_concurrent_requests_share_batches_and_get_their_own_rows():
    calls = []
    batcher = EmbeddingBatcher(slow_encoder(calls), max_batch=16)

    async def main():
        return await asyncio.gather(*(batcher.embed(f"t-{i}") for i in range(64)))

    out = asyncio.run(main())
    assert [float(o[0]) for o in out] == [float(i) for i in range(64)]
    assert len(calls) <= 6 and max(len(c) for c in calls) <= 16  # 64 requests in a handful of passes
    assert sum(len(c) for c in calls) == 64


def test_a_lone_request_is_embedded_at_once_and_errors_reach_every_waiter():
    calls = []
    batcher = EmbeddingBatcher(slow_encoder(calls))
    assert asyncio.run(batcher.embed("t-7"))[0] == 7.0 and calls == [["t-7"]]

    def broken(texts):
        raise RuntimeError("boom")

    failing = EmbeddingBatcher(broken)

    async def main():
        return await asyncio.gather(*(failing.embed(f"t-{i}") for i in range(3)), return_exceptions=True)

    assert all(isinstance(r, RuntimeError) for r in asyncio.run(main()))


def test_a_repeated_text_is_answered_from_the_bounded_cache_without_a_forward_pass():
    calls = []
    batcher = EmbeddingBatcher(slow_encoder(calls), cache_size=2)

    async def main(texts):
        return [await batcher.embed(t) for t in texts]

    first, again = asyncio.run(main(["t-1", "t-1"]))
    assert calls == [["t-1"]] and batcher.cache_hits == 1 and np.array_equal(first, again)
    assert not again.flags.writeable  # a cached row is shared: nobody may change it
    asyncio.run(main(["t-2", "t-3", "t-1"]))  # t-1 was pushed out by t-2 and t-3: embedded again
    assert calls[-1] == ["t-1"] and len(calls) == 4
    off = EmbeddingBatcher(slow_encoder(calls := []))
    asyncio.run(_twice(off, "t-5"))
    assert calls == [["t-5"], ["t-5"]] and off.cache_hits == 0  # cache_size 0: every request is embedded


async def _twice(batcher, text):
    return [await batcher.embed(text) for _ in range(2)]


def test_concurrent_requests_for_one_text_share_a_forward_pass_and_a_waiter_that_gives_up_takes_nobody_with_it():
    calls = []
    batcher = EmbeddingBatcher(slow_encoder(calls))

    async def main():
        impatient = asyncio.ensure_future(asyncio.wait_for(batcher.embed("t-4"), timeout=0.001))
        patient = [batcher.embed("t-4") for _ in range(3)]
        return await asyncio.gather(impatient, *patient, return_exceptions=True)

    first, *rest = asyncio.run(main())
    assert isinstance(first, asyncio.TimeoutError)
    assert [float(r[0]) for r in rest] == [4.0, 4.0, 4.0] and calls == [["t-4"]]


def test_a_caller_past_its_timeout_gets_a_timeout_error_and_the_others_their_row():
    calls = []
    batcher = EmbeddingBatcher(slow_encoder(calls), cache_size=4)

    async def main():
        return await asyncio.gather(batcher.embed("t-1", timeout=0.001), batcher.embed("t-1", timeout=5), return_exceptions=True)

    late, patient = asyncio.run(main())
    assert isinstance(late, TimeoutError) and float(patient[0]) == 1.0 and calls == [["t-1"]]
    assert float(asyncio.run(batcher.embed("t-1", timeout=5))[0]) == 1.0 and batcher.cache_hits == 1


def test_the_encoder_does_not_queue_behind_the_event_loops_default_executor():
    """LiteLLM runs every completion's set-up in the loop's default executor: a full default executor must
    not hold up a request's embedding."""
    batcher = EmbeddingBatcher(slow_encoder([]))

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
        release = threading.Event()
        busy = loop.run_in_executor(None, release.wait, 10)
        try:
            return await asyncio.wait_for(batcher.embed("t-3"), timeout=5)
        finally:
            release.set()
            await busy

    assert float(asyncio.run(main())[0]) == 3.0


def test_a_closed_batcher_fails_each_request_at_once():
    batcher = EmbeddingBatcher(slow_encoder(calls := []))
    batcher.close()
    for _ in range(2):  # and keeps failing, rather than waiting on a batch that never ran
        with pytest.raises(RuntimeError):
            asyncio.run(asyncio.wait_for(batcher.embed("t-1"), timeout=5))
    assert calls == []


def test_texts_predicted_to_wait_past_the_budget_are_shed_at_once(monkeypatch):
    """With a forward pass timed (by a fake clock: 0.1 s for one short text) and the next one stuck in the
    encoder, a burst of 40 texts with a 0.25 s budget: the first few are queued, the rest raise Overloaded
    at once -- while the encoder is still stuck -- and the queued ones get their rows once it is free."""
    import types

    import regret_gateway.gateway.batcher as batcher_module
    from regret_gateway.gateway.batcher import Overloaded

    clock = [0.0]
    monkeypatch.setattr(batcher_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    release = threading.Event()

    def encode(texts):
        if texts == ["t-0"]:
            clock[0] += 0.1
        else:
            assert release.wait(10)
        return np.array([[float(t.split("-")[1])] for t in texts])

    batcher = EmbeddingBatcher(encode, max_batch=64)

    async def main():
        assert (await batcher.embed("t-0", budget=0.25))[0] == 0.0  # timed: the batcher now knows its speed
        stuck = asyncio.ensure_future(batcher.embed("t-1", budget=0.25))
        await until(lambda: in_flight(batcher, "t-1"))
        burst = [asyncio.ensure_future(batcher.embed(f"t-{i}", budget=0.25)) for i in range(2, 42)]
        # every task of the burst has run to its first wait (queued) or raised
        await until(lambda: all(t.done() or is_queued(batcher, f"t-{i}") for i, t in zip(range(2, 42), burst)))
        shed = [t for t in burst if t.done()]
        assert all(isinstance(t.exception(), Overloaded) for t in shed) and not stuck.done()
        queued = [t for t in burst if not t.done()]
        assert 0 < len(queued) < 40 and batcher.shed == len(shed)
        assert queued == burst[: len(queued)]  # first come, first served
        release.set()
        rows = await asyncio.gather(stuck, *queued)
        assert [float(r[0]) for r in rows] == [float(i) for i in range(1, len(queued) + 2)]
        unbudgeted = await asyncio.gather(*(batcher.embed(f"t-{i}") for i in range(100, 140)))  # no budget: none shed
        assert len(unbudgeted) == 40 and batcher.shed == len(shed)

    asyncio.run(main())


def test_under_overload_a_long_text_is_read_from_its_first_tokens_before_it_is_shed(monkeypatch):
    """A forward pass over a long text took 0.3 s (fake clock); with another batch in flight and a 0.25 s
    budget the next long text would wait past it, but its first ~64 tokens fit: the encoder is given that
    cut text. Without short_tokens a long text is shed."""
    import types

    import regret_gateway.gateway.batcher as batcher_module
    from regret_gateway.gateway.batcher import CHARS_PER_TOKEN, Overloaded
    from regret_gateway.truncation import DEFAULT_TRUNCATION, clip_chars

    clock = [0.0]
    monkeypatch.setattr(batcher_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    seen: list[list[str]] = []
    release = threading.Event()

    def encode(texts):
        seen.append(list(texts))
        if len(seen) == 1:
            clock[0] += 0.3
        else:
            assert release.wait(10)
        return np.ones((len(texts), 2))

    batcher = EmbeddingBatcher(encode, max_tokens=256)
    long_a, long_b, long_c = ("a " * 2000, "b " * 2000, "c " * 2000)
    short_b = clip_chars(long_b, 64, DEFAULT_TRUNCATION, CHARS_PER_TOKEN)  # its head and tail, as the encoder cuts

    async def main():
        await batcher.embed(long_a, budget=0.5)  # the encoder was idle: embedded whole (in time), and timed
        stuck = asyncio.ensure_future(batcher.embed("t-1", budget=0.25))
        await until(lambda: in_flight(batcher, "t-1"))
        cut = asyncio.ensure_future(batcher.embed(long_b, budget=0.25, short_tokens=64))
        await until(lambda: cut.done() or is_queued(batcher, short_b))
        assert not cut.done() and batcher.shortened == 1 and batcher.shed == 0
        with pytest.raises(Overloaded):
            await batcher.embed(long_c, budget=0.25)
        release.set()
        await asyncio.gather(stuck, cut)
        assert seen[-1] == [short_b] and batcher.shed == 1

    asyncio.run(main())


def test_a_text_that_would_make_an_earlier_texts_batch_miss_its_deadline_is_shed(monkeypatch):
    """Texts queued together come back together: a newcomer whose own budget would be met is still shed when
    joining the batch would make the text already waiting in it miss its deadline."""
    import types

    import regret_gateway.gateway.batcher as batcher_module
    from regret_gateway.gateway.batcher import Overloaded

    clock = [0.0]
    monkeypatch.setattr(batcher_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    release = threading.Event()

    def encode(texts):
        if texts == ["t-0"]:
            clock[0] += 0.1  # one short text: 0.1 s
        else:
            assert release.wait(10)
        return np.ones((len(texts), 1))

    batcher = EmbeddingBatcher(encode, max_batch=8)

    async def main():
        await batcher.embed("t-0", budget=1.0)
        stuck = asyncio.ensure_future(batcher.embed("t-1", budget=1.0))
        await until(lambda: in_flight(batcher, "t-1"))
        early = asyncio.ensure_future(batcher.embed("a" * 400, budget=1.0))  # queued: back in ~0.5 s of its 1 s
        await until(lambda: early.done() or is_queued(batcher, "a" * 400))
        assert not early.done()
        clock[0] += 0.45  # the early text has waited 0.45 s
        with pytest.raises(Overloaded):  # alone it would be back within its own 1 s, but not within the early text's
            await batcher.embed("b" * 400, budget=1.0)
        release.set()
        await asyncio.gather(stuck, early)
        assert batcher.shed == 1

    asyncio.run(main())


def test_an_idle_encoder_that_overran_the_budget_sheds_until_one_text_a_second_measures_it_again(monkeypatch):
    """A forward pass measured far over the budget (here: one text took 100 s -- the CPU taken by others, or
    a burst): the next idle text of that size is shed at once rather than wait out its budget and burn CPU;
    once PROBE_S has passed one is embedded all the same, and its fast pass clears the way for the rest."""
    import types

    import regret_gateway.gateway.batcher as batcher_module
    from regret_gateway.gateway.batcher import PROBE_S, Overloaded

    clock = [0.0]
    monkeypatch.setattr(batcher_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    def encode(texts):
        clock[0] += 100.0 if texts == ["t-0"] else 0.01
        return np.ones((len(texts), 1))

    batcher = EmbeddingBatcher(encode)

    async def main():
        await batcher.embed("t-0", budget=0.25)
        with pytest.raises(Overloaded):
            await batcher.embed("t-1", budget=0.25)
        assert (await batcher.embed("t-1"))[0] == 1.0  # without a budget nothing is shed
        clock[0] += PROBE_S
        for i in range(2, 5):  # the first measures again (0.01 s): the quiet traffic after it is embedded
            await batcher.embed(f"t-{i}", budget=0.25)
        assert batcher.shed == 1 and batcher.batches == 5

    asyncio.run(main())


def test_a_text_every_caller_gave_up_on_is_not_embedded():
    """Callers past their timeout have fallen back: their queued text is dropped before its batch runs (it
    would only take CPU from the requests still waiting); a text someone still waits for is embedded."""
    release = threading.Event()
    calls: list[list[str]] = []

    def encode(texts):
        calls.append(list(texts))
        if texts == ["t-0"]:
            assert release.wait(10)
        return np.array([[float(t.split("-")[1])] for t in texts])

    batcher = EmbeddingBatcher(encode)

    async def main():
        stuck = asyncio.ensure_future(batcher.embed("t-0"))
        await until(lambda: in_flight(batcher, "t-0"))
        gave_up = asyncio.ensure_future(batcher.embed("t-1", timeout=0.001))
        waits = asyncio.ensure_future(batcher.embed("t-2"))
        with pytest.raises(TimeoutError):
            await gave_up
        release.set()
        await asyncio.gather(stuck, waits)
        assert calls == [["t-0"], ["t-2"]] and batcher.abandoned == 1

    asyncio.run(main())


def test_a_batch_that_starts_right_after_another_runs_on_the_busy_encoder():
    """Under load (a backlog: the next batch starts as soon as one ends) the batcher calls ``encode_busy``
    (the gateway's: ONNX Runtime on half the cores, leaving the proxy's loop the rest); a request that finds
    the encoder idle is embedded by ``encode``."""
    calls: list[str] = []

    def encode(texts):  # rows come back through the loop, so the texts gathered meanwhile queue behind
        calls.append("idle")
        return np.ones((len(texts), 1))

    def encode_busy(texts):
        calls.append("busy")
        return np.ones((len(texts), 1))

    batcher = EmbeddingBatcher(encode, max_batch=4, encode_busy=encode_busy)

    async def main():
        await batcher.embed("t-0")
        await asyncio.gather(*(batcher.embed(f"t-{i}") for i in range(1, 10)))

    asyncio.run(main())
    assert calls[:2] == ["idle", "idle"] and set(calls[2:]) == {"busy"} and len(calls) == 4


def test_rows_that_come_back_later_than_predicted_grow_a_margin_that_sheds_earlier(monkeypatch):
    """The encoder turns twice as slow as it was timed: the queued rows come back later than predicted, the
    batcher keeps a margin for it, and a text whose predicted wait would just fit its budget is now shed."""
    import types

    import regret_gateway.gateway.batcher as batcher_module
    from regret_gateway.gateway.batcher import Overloaded

    clock = [0.0]
    monkeypatch.setattr(batcher_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    go = threading.Semaphore(0)

    def encode(texts):
        if texts == ["t-0"]:
            clock[0] += 0.1
        else:
            assert go.acquire(timeout=10)
            clock[0] += 0.3  # slower than learnt
        return np.ones((len(texts), 1))

    batcher = EmbeddingBatcher(encode)

    async def main():
        await batcher.embed("t-0", budget=10.0)
        for i in range(4):
            first = asyncio.ensure_future(batcher.embed(f"a-{i}", budget=10.0))  # finds the encoder idle
            await until(lambda i=i: in_flight(batcher, f"a-{i}"))
            second = asyncio.ensure_future(batcher.embed(f"b-{i}", budget=10.0))  # queued behind it, predicted
            await until(lambda i=i: is_queued(batcher, f"b-{i}"))
            go.release()
            go.release()
            await asyncio.gather(first, second)
        assert batcher._margin_s > 0
        stuck = asyncio.ensure_future(batcher.embed("c-0", budget=10.0))
        await until(lambda: in_flight(batcher, "c-0"))
        wait, slack = batcher._predict(batcher.tokens("c-1"), 10.0)
        with pytest.raises(Overloaded):  # it would fit with no margin: budget = wait + a bit less than the margin
            await batcher.embed("c-1", budget=wait + batcher._margin_s / 2)
        go.release()
        await stuck

    asyncio.run(main())


def test_probes_that_overrun_too_come_twice_as_rarely(monkeypatch):
    """Under a sustained hog every probe overruns: the wait before the next one doubles (1 s, 2 s, 4 s ...),
    so a busy machine pays for few wasted forward passes; a probe that fits resets it."""
    import types

    import regret_gateway.gateway.batcher as batcher_module
    from regret_gateway.gateway.batcher import PROBE_S, Overloaded

    clock = [0.0]
    monkeypatch.setattr(batcher_module, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    slow = [True]

    def encode(texts):
        clock[0] += 1.0 if slow[0] else 0.01
        return np.ones((len(texts), 1))

    batcher = EmbeddingBatcher(encode)

    async def main():
        await batcher.embed("t-0", budget=0.25)  # overran: the next probe in 2 s
        for k, wait in enumerate((2 * PROBE_S, 4 * PROBE_S)):
            clock[0] += wait - 0.01
            with pytest.raises(Overloaded):
                await batcher.embed(f"early-{k}", budget=0.25)
            clock[0] += 0.01
            await batcher.embed(f"probe-{k}", budget=0.25)  # embedded, overruns again
        slow[0] = False
        clock[0] += 8 * PROBE_S
        await batcher.embed("fits", budget=0.25)
        await batcher.embed("after", budget=0.25)  # at once: the probe that fitted reset the wait
        assert batcher.shed == 2 and batcher.batches == 5

    asyncio.run(main())


def test_an_inline_encoder_embeds_on_the_callers_loop_and_is_never_shed():
    """The static encoder (``inline``) embeds each text at once on the caller's event loop: no worker thread,
    no batch, and no shedding however late the loop's hops have been (a saturated proxy) -- while the same
    batcher without ``inline`` sheds that text."""
    threads: list[str] = []

    def encode(texts):
        threads.append(threading.current_thread().name)
        return np.ones((len(texts), 4), dtype=np.float32)

    async def main(inline: bool):
        batcher = EmbeddingBatcher(encode, cache_size=10, inline=(lambda: True) if inline else None)
        await batcher.embed("warm the rates up", budget=1.0)
        batcher._lag_s = 5.0  # every hop of the loop has been taking 5 s
        batcher._busy, batcher._pending = True, [(b"k", "queued", 10, float("inf"), float("inf"), 0.0)]  # one in flight
        try:
            return batcher, await batcher.embed("a prompt under a saturated loop", budget=0.25)
        finally:
            batcher._busy, batcher._pending = False, []
            batcher.close()

    batcher, row = asyncio.run(main(inline=True))
    assert row.shape == (4,) and batcher.inlined == 2 and batcher.batches == 0 and batcher.shed == 0
    assert set(threads) == {threading.main_thread().name}
    assert np.array_equal(batcher._cached(batcher._key("a prompt under a saturated loop")), row)
    from regret_gateway.gateway.batcher import Overloaded

    with pytest.raises(Overloaded):
        asyncio.run(main(inline=False))
