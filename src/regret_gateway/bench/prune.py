"""Retention on PostgreSQL: the same days of decisions pruned row by row (a store at revision 0011, before day
partitions) and dropped a day at a time (a store at head), side by side in one run."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.bench.store import scratch_database
from regret_gateway.request_ids import new_request_id
from regret_gateway.store.engine import make_engine
from regret_gateway.store.partitions import DAYS_AHEAD, ensure_days
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.retention import prune, table_sizes
from regret_gateway.store.writes import record_decisions, record_feedback

STORES = (("row by row (revision 0011)", "0011"), ("day partitions (head)", "head"))
_CHUNK = 5_000  # decisions per write transaction while filling


@dataclass(frozen=True)
class PruneTiming:
    """One store's prune of the same days."""

    store: str
    held: int  # decisions before the prune
    bytes_per_decision: float | None  # decisions, outcomes and scores on disk, per decision held
    deleted: int
    days_dropped: int
    batches: int
    seconds: float

    @property
    def per_s(self) -> float:
        return self.deleted / self.seconds


def _fill(url: str, first: date, days: int, per_day: int, scored: float, dim: int, seed: int) -> None:
    """``per_day`` decisions (with outcomes, a ``scored`` share of them scored) on each of ``days`` days from
    ``first``, gateway ids made at their times (the same rows for the same seed)."""
    rng = np.random.default_rng(seed)
    engine = make_engine(url)
    try:
        for d in range(days):
            start = datetime.combine(first + timedelta(days=d), datetime.min.time(), tzinfo=timezone.utc)
            for lo in range(0, per_day, _CHUNK):
                moments = sorted(start + timedelta(seconds=float(s)) for s in rng.uniform(0, 86_400, min(_CHUNK, per_day - lo)))
                ids = [new_request_id(m) for m in moments]
                records = [
                    DecisionRecord(request_id=rid, tier="standard", lam=100.0, embedding_model="bench",
                                   embedding=rng.normal(size=dim).astype(np.float32), chosen_model="small", propensity=0.5,
                                   created_at=m, outcome=OutcomeRecord(request_id=rid, cost_usd=1e-4, created_at=m))
                    for rid, m in zip(ids, moments)
                ]  # fmt: skip
                with Session(engine) as s, s.begin():
                    record_decisions(s, records)
                    record_feedback(s, [FeedbackRecord(rid, 1.0) for rid in ids if rng.random() < scored])
    finally:
        engine.dispose()


def _stored_bytes(engine) -> tuple[int, float | None]:
    sizes = {s.name: s for s in table_sizes(engine)}
    held = sizes["decisions"].rows
    parts = [sizes[t].bytes for t in ("decisions", "outcomes", "feedback")]
    return held, None if held == 0 or any(b is None for b in parts) else sum(b for b in parts if b is not None) / held


def prune_timings(url: str, *, per_day: int, days: int, drop: int, scored: float = 0.05, dim: int = 384, seed: int = 0,
                  echo: Callable[[str], None] = print) -> list[PruneTiming]:  # fmt: skip
    """Fill a store at each of :data:`STORES`' revisions with the same ``days`` days of decisions (ending
    yesterday) and prune the oldest ``drop`` of them; each prune timed alone."""
    first = datetime.now(timezone.utc).date() - timedelta(days=days)
    cutoff = datetime.combine(first + timedelta(days=drop), datetime.min.time(), tzinfo=timezone.utc)
    results = []
    for name, revision in STORES:
        with scratch_database(url, revision=revision) as target:
            engine = make_engine(target)
            try:
                ensure_days(engine, first, ahead=days + DAYS_AHEAD)  # as the gateway's starts on those days made them
                echo(f"{name}: filling {days} days of {per_day:,} decisions ...")
                _fill(target, first, days, per_day, scored, dim, seed)
                held, per_decision = _stored_bytes(engine)
                started = time.perf_counter()
                done = prune(engine, cutoff)
                seconds = time.perf_counter() - started
            finally:
                engine.dispose()
        results.append(PruneTiming(name, held, per_decision, done.decisions, done.days, done.batches, seconds))
    return results


def prune_table(results: list[PruneTiming]) -> str:
    """Markdown: each store's prune, with its rate as a ratio to the first's."""
    lines = ["| store | decisions held | bytes a decision | deleted | days dropped whole | batches | seconds | decisions/s | ratio to first |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in results:
        per = "-" if r.bytes_per_decision is None else f"{r.bytes_per_decision:,.0f}"
        lines.append(f"| {r.store} | {r.held:,} | {per} | {r.deleted:,} | {r.days_dropped} | {r.batches} | {r.seconds:.2f} | "
                     f"{r.per_s:,.0f} | {r.per_s / results[0].per_s:.1f} |")  # fmt: skip
    return "\n".join(lines)
