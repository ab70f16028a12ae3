"""Pruning: only what is older than the cutoff goes, a batch per transaction, while a writer keeps writing;
the sizes the store reports shrink with it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.retention import drop_embeddings, prune, table_sizes
from regret_gateway.store.schema import Decision, Feedback, Outcome, embedded
from regret_gateway.store.writer import BatchedWriter
from regret_gateway.store.writes import record_decisions, record_feedback

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def record(rid: str, created_at: datetime) -> DecisionRecord:
    return DecisionRecord(
        request_id=rid, tier="standard", lam=100.0, embedding_model="mini", embedding=np.ones(384, dtype=np.float32),
        chosen_model="small", propensity=0.5, created_at=created_at,
        outcome=OutcomeRecord(request_id=rid, cost_usd=1e-4),
    )  # fmt: skip


def ids_of(engine, model) -> set[str]:
    with Session(engine) as s:
        return set(s.scalars(select(model.request_id)))


def test_prune_deletes_only_what_is_older_than_the_cutoff_in_batches_while_a_writer_writes(engine, tmp_path):
    old = [f"old{i}" for i in range(23)]
    young = [f"young{i}" for i in range(7)]
    with Session(engine) as s, s.begin():
        record_decisions(s, [record(rid, NOW - timedelta(days=100, minutes=i)) for i, rid in enumerate(old)])
        record_decisions(s, [record(rid, NOW - timedelta(days=10, minutes=i)) for i, rid in enumerate(young)])
        record_feedback(s, [FeedbackRecord(rid, 1.0) for rid in old[:5] + young[:3]])
    before = {t.name: t for t in table_sizes(engine)}
    assert (before["decisions"].rows, before["outcomes"].rows, before["feedback"].rows) == (30, 30, 8)
    cutoff = NOW - timedelta(days=90)
    assert prune(engine, cutoff, dry_run=True) == prune(engine, cutoff, dry_run=True)  # a dry run deletes nothing
    counted = prune(engine, cutoff, dry_run=True)
    assert (counted.decisions, counted.outcomes, counted.feedback, counted.batches) == (23, 23, 5, 0)
    assert len(ids_of(engine, Decision)) == 30

    writer = BatchedWriter(engine, tmp_path / "spill", flush_interval_s=0.01).start()
    written_between = []

    def between_batches(n: int) -> None:
        """After each batch, the writer writes a new decision and it is committed before the next batch."""
        rid = f"during{len(written_between)}"
        writer.submit(record(rid, NOW))
        assert writer.drain(timeout=30), writer.stats()
        written_between.append(rid)

    try:
        done = prune(engine, cutoff, batch_size=10, on_batch=between_batches)
    finally:
        writer.close()
    assert (done.decisions, done.outcomes, done.feedback, done.batches) == (23, 23, 5, 3)  # 10 + 10 + 3
    assert written_between == ["during0", "during1", "during2"] and writer.stats().spilled == 0
    kept = set(young) | set(written_between)
    assert ids_of(engine, Decision) == kept and ids_of(engine, Outcome) == kept
    assert ids_of(engine, Feedback) == set(young[:3])
    after = {t.name: t for t in table_sizes(engine)}
    assert (after["decisions"].rows, after["outcomes"].rows, after["feedback"].rows) == (10, 10, 3)
    if before["decisions"].bytes is not None and engine.dialect.name == "sqlite":
        assert after["decisions"].bytes < before["decisions"].bytes  # PostgreSQL reuses the space after VACUUM


def test_prune_refuses_a_batch_size_below_one(engine):
    with pytest.raises(ValueError, match="batch_size"):
        prune(engine, NOW, batch_size=0)


def embedded_ids(engine) -> set[str]:
    with Session(engine) as s:
        return set(s.scalars(select(Decision.request_id).where(embedded())))


def test_drop_embeddings_drops_only_those_of_decisions_unscored_past_the_window_a_batch_at_a_time(engine):
    old = [f"old{i}" for i in range(7)]  # made 10 days ago, never scored
    scored = [f"scored{i}" for i in range(3)]  # made 10 days ago, scored
    young = [f"young{i}" for i in range(4)]  # made yesterday: may still be scored
    with Session(engine) as s, s.begin():
        record_decisions(s, [record(rid, NOW - timedelta(days=10, minutes=i)) for i, rid in enumerate(old + scored)])
        record_decisions(s, [record(rid, NOW - timedelta(days=1, minutes=i)) for i, rid in enumerate(young)])
        record_feedback(s, [FeedbackRecord(rid, 1.0) for rid in scored])
    cutoff = NOW - timedelta(days=7)
    assert drop_embeddings(engine, cutoff, dry_run=True) == 7 and len(embedded_ids(engine)) == 14
    late = old[0]  # the newest of the old ones: the last batch's; a score for it comes while the first batch is dropped
    batches = []

    def between_batches(n: int) -> None:
        if not batches:
            with Session(engine) as s, s.begin():
                record_feedback(s, [FeedbackRecord(late, 0.5)])
        batches.append(n)

    assert drop_embeddings(engine, cutoff, batch_size=2, on_batch=between_batches) == 6
    assert batches == [2, 2, 2]  # the scored one is no longer read: three batches, not four
    assert embedded_ids(engine) == {late, *scored, *young}
    assert drop_embeddings(engine, cutoff) == 0  # nothing left to drop
    with Session(engine) as s:  # the decisions themselves stay (their outcomes: spend, the savings report)
        assert len(s.scalars(select(Decision.request_id)).all()) == 14
