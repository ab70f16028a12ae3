"""Sustained write throughput of the store through the gateway's batched writer, per database URL."""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

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
def scratch_database(url: str) -> Iterator[str]:
    """A migrated, empty database for the run: a fresh schema on PostgreSQL (dropped afterwards), a
    temporary file for SQLite (``sqlite`` alone means a temporary file)."""
    if url.startswith("sqlite"):
        with tempfile.TemporaryDirectory() as tmp:
            target = f"sqlite:///{tmp}/bench.db" if url in ("sqlite", "sqlite://", "sqlite:///") else url
            upgrade(target)
            yield target
        return
    schema = f"rg_bench_{uuid.uuid4().hex[:8]}"
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    sep = "&" if "?" in url else "?"
    target = f"{url}{sep}options=-csearch_path%3D{schema}"
    try:
        upgrade(target)
        yield target
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@dataclass(frozen=True)
class WriteThroughput:
    """One database's sustained write rate through the batched writer."""

    backend: str  # sqlite / postgresql
    rows: int
    dim: int
    seconds: float  # from the first submit until every row is committed
    submit_us_per_row: float  # what a caller waits to hand a row over
    writer: WriterStats

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds


def throughput_table(results: list[WriteThroughput]) -> str:
    """Markdown: each database's rate, side by side, as a ratio to the first."""
    lines = ["| backend | rows | seconds | rows/s | submit µs/row | spilled | replayed | ratio to first |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in results:
        lines.append(f"| {r.backend} | {r.rows} | {r.seconds:.2f} | {r.rows_per_s:,.0f} | {r.submit_us_per_row:.1f} | "
                     f"{r.writer.spilled} | {r.writer.replayed} | {r.rows_per_s / results[0].rows_per_s:.2f} |")  # fmt: skip
    return "\n".join(lines)


def _count(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.scalar(select(func.count()).select_from(Decision)) or 0)


def write_throughput(
    url: str, *, rows: int = 20_000, dim: int = 384, batch_size: int = 500, queue_size: int = 10_000
) -> WriteThroughput:
    """Submit ``rows`` decisions (with outcomes) to a :class:`BatchedWriter` as fast as possible and
    time until all are committed. Returns rows/s and the writer's counters."""
    with scratch_database(url) as target, tempfile.TemporaryDirectory() as spill:
        engine = make_engine(target)
        writer = BatchedWriter(engine, spill, queue_size=queue_size, batch_size=batch_size, flush_interval_s=0.05).start()
        started = time.perf_counter()
        for record in synthetic_records(rows, dim):
            writer.submit(record)
        submitted = time.perf_counter() - started
        if not writer.drain(timeout=600):
            raise RuntimeError(f"writer did not finish within 600 s: {writer.stats()}")
        elapsed = time.perf_counter() - started
        writer.close()
        stored = _count(engine)
        engine.dispose()
    if stored != rows:
        raise RuntimeError(f"{stored} rows stored, expected {rows}")
    return WriteThroughput(target.split(":")[0].split("+")[0], rows, dim, elapsed, 1e6 * submitted / rows, writer.stats())
