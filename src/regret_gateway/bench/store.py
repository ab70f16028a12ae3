"""Sustained write throughput of the store through the gateway's batched writer, per database URL."""

from __future__ import annotations

import multiprocessing
import queue
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields

import numpy as np
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session

from regret_gateway.store.engine import make_engine
from regret_gateway.store.migrate import upgrade
from regret_gateway.store.records import DecisionRecord, OutcomeRecord
from regret_gateway.store.schema import Decision
from regret_gateway.store.writer import BatchedWriter, WriterStats


def synthetic_records(n: int, dim: int, seed: int = 0, prefix: str = "req") -> Iterator[DecisionRecord]:
    """``n`` decisions with outcomes, generated lazily (memory stays flat however large ``n`` is)."""
    rng = np.random.default_rng(seed)
    models = ("small", "medium", "large")
    for i in range(n):
        rid = f"{prefix}-{i:08d}"
        t = int(rng.integers(3))
        yield DecisionRecord(
            request_id=rid,
            tier="standard",
            lam=200.0,
            embedding_model="bench",
            embedding=rng.normal(size=dim).astype(np.float32),
            chosen_model=models[t],
            propensity=float(rng.uniform(0.05, 1.0)),
            team=f"team-{i % 3}",
            prompt_hash=f"{i:064x}",
            outcome=OutcomeRecord(
                request_id=rid, cost_usd=float(rng.uniform(0, 1e-3)), prompt_tokens=100, completion_tokens=50, latency_ms=300.0
            ),
        )


@contextmanager
def scratch_database(url: str, revision: str = "head") -> Iterator[str]:
    """An empty database migrated to ``revision`` for the run: a fresh schema on PostgreSQL (dropped afterwards),
    a temporary file for SQLite (``sqlite`` alone means a temporary file)."""
    if url.startswith("sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            target = f"sqlite:///{tmp}/bench.db" if url in ("sqlite", "sqlite://", "sqlite:///") else url
            upgrade(target, revision=revision)
            yield target
        return
    schema = f"rg_bench_{uuid.uuid4().hex[:8]}"
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    sep = "&" if "?" in url else "?"
    target = f"{url}{sep}options=-csearch_path%3D{schema}"
    try:
        upgrade(target, revision=revision)
        yield target
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@dataclass(frozen=True)
class WriteThroughput:
    """One database's write rate through the batched writer: ``writers`` processes (replicas) at once."""

    backend: str  # sqlite / postgresql
    writers: int
    rows: int  # all writers together
    dim: int
    offered: float | None  # records/s each writer was offered (open loop); None: as fast as its queue takes them
    seconds: float  # from the first submit until every row is committed
    writer: WriterStats  # summed over the writers
    cpu_busy: float | None  # the machine's CPU busy share while they wrote (None: not measured)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds


def throughput_table(results: list[WriteThroughput]) -> str:
    """Markdown: each run's rate, side by side, as a ratio to the first."""
    lines = ["| backend | writers | offered rows/s per writer | rows | seconds | rows/s | spilled | replayed | max queue | CPU busy | ratio to first |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in results:
        offered = "as fast as taken" if r.offered is None else f"{r.offered:,.0f}"
        lines.append(f"| {r.backend} | {r.writers} | {offered} | {r.rows} | {r.seconds:.2f} | {r.rows_per_s:,.0f} | "
                     f"{r.writer.spilled} | {r.writer.replayed} | {r.writer.max_queue_depth} | "
                     f"{'-' if r.cpu_busy is None else f'{r.cpu_busy:.0%}'} | "
                     f"{r.rows_per_s / results[0].rows_per_s:.2f} |")  # fmt: skip
    return "\n".join(lines)


def _count(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.scalar(select(func.count()).select_from(Decision)) or 0)


def _offer(writer: BatchedWriter, records: list[DecisionRecord], rate: float | None, queue_size: int) -> None:
    """Hand the records over. Open loop (``rate``): at that many per second, whatever the writer does -- what
    it cannot take overflows to the spill file, as in the gateway. Closed loop (None): as fast as the writer
    takes them, waiting while its queue is full (a measure of capacity, with no spilling)."""
    started = time.monotonic()
    for i, record in enumerate(records):
        if rate is not None:
            if i % 50 == 0 and (ahead := started + i / rate - time.monotonic()) > 0:
                time.sleep(ahead)
        elif writer.queue_depth() >= queue_size:
            while writer.queue_depth() > queue_size // 2:
                time.sleep(0.001)
        writer.submit(record)


def _one_writer(url: str, rows: int, dim: int, seed: int, batch_size: int, queue_size: int, rate: float | None,
                barrier, results) -> None:  # fmt: skip
    """One writer process: make its records, wait for the others, write; put (monotonic start, end, its
    counters) on ``results``. The records are made before the clock starts: what is timed is the writer,
    not the generator."""
    records = list(synthetic_records(rows, dim, seed=seed, prefix=f"w{seed}"))
    engine = make_engine(url)
    with tempfile.TemporaryDirectory() as spill:
        writer = BatchedWriter(engine, spill, queue_size=queue_size, batch_size=batch_size, flush_interval_s=0.05).start()
        barrier.wait()
        started = time.monotonic()
        _offer(writer, records, rate, queue_size)
        if not writer.drain(timeout=600):
            raise RuntimeError(f"writer did not finish within 600 s: {writer.stats()}")
        ended = time.monotonic()
        writer.close()
    engine.dispose()
    results.put((started, ended, writer.stats()))


def _cpu_ticks() -> tuple[int, int] | None:
    """The machine's (busy, total) CPU ticks so far (Linux); None elsewhere."""
    try:
        with open("/proc/stat") as fh:
            ticks = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)  # idle and iowait are not busy


def _summed(stats: list[WriterStats]) -> WriterStats:
    total = {f.name: sum(getattr(s, f.name) for s in stats) for f in fields(WriterStats)}
    total["max_queue_depth"] = max(s.max_queue_depth for s in stats)
    total["database_down"] = any(s.database_down for s in stats)
    return WriterStats(**total)


def write_throughput(url: str, *, rows: int = 20_000, dim: int = 384, batch_size: int = 500, queue_size: int = 10_000,
                     writers: int = 1, rate: float | None = None) -> WriteThroughput:  # fmt: skip
    """``writers`` processes (replicas), each with its own :class:`BatchedWriter` on one scratch database and
    each writing ``rows`` decisions with outcomes, started together; timed from the first submit until every
    row is committed, with the machine's CPU busy share over that time (the database server included when
    it runs here)."""
    ctx = multiprocessing.get_context("spawn")
    with scratch_database(url) as target:
        barrier, results = ctx.Barrier(writers + 1), ctx.Queue()
        procs = [ctx.Process(target=_one_writer, args=(target, rows, dim, w, batch_size, queue_size, rate, barrier, results))
                 for w in range(writers)]  # fmt: skip
        for p in procs:
            p.start()
        runs: list[tuple[float, float, WriterStats]] = []
        try:
            barrier.wait(timeout=600)
            before = _cpu_ticks()
            while len(runs) < writers:
                try:
                    runs.append(results.get(timeout=1.0))
                except queue.Empty:
                    if failed := [p.exitcode for p in procs if p.exitcode not in (None, 0)]:
                        raise RuntimeError(f"a writer process failed (exit codes {failed})") from None
            after = _cpu_ticks()
        finally:
            for p in procs:
                if len(runs) < writers:
                    p.kill()
                p.join()
        engine = make_engine(target)
        stored = _count(engine)
        engine.dispose()
    if stored != rows * writers:
        raise RuntimeError(f"{stored} rows stored, expected {rows * writers}")
    busy = None if before is None or after is None else (after[0] - before[0]) / max(1, after[1] - before[1])
    seconds = max(end for _, end, _ in runs) - min(start for start, _, _ in runs)
    backend = target.split(":")[0].split("+")[0]
    return WriteThroughput(backend, writers, rows * writers, dim, rate, seconds, _summed([s for _, _, s in runs]), busy)
