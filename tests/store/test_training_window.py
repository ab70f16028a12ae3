"""Retrain's read of a large window: a stratified sample past ``max_rows`` that keeps every (tier, model)'s
share and the logged propensities, and memory that follows what is kept, not the window. SQLite and
PostgreSQL."""

from __future__ import annotations

import tracemalloc
from collections import Counter

import numpy as np
from sqlalchemy.orm import Session

import regret_gateway.store.rows as training_window
from regret_gateway.sampling import sample_rows
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.writes import record_decisions, record_feedback
from regret_gateway.trainset.window import training_set

TIERS = ("gold", "standard", "economy")
MODELS = ("small", "medium", "large", "rare")


def fill(engine, n: int, dim: int) -> dict[str, tuple]:
    """n scored decisions; a row's embedding is its index, its propensity and model depend on it. Returns
    what was written per request id: (tier, model, propensity, first embedding value)."""
    rng = np.random.default_rng(0)
    written = {}
    for start in range(0, n, 1000):
        records = []
        for i in range(start, min(n, start + 1000)):
            rid = f"q{i:06d}"
            model = MODELS[3] if i % 50 == 0 else MODELS[int(rng.integers(3))]
            tier, p = TIERS[i % 3], float(rng.uniform(0.05, 1.0))
            written[rid] = (tier, model, p, float(i))
            records.append(DecisionRecord(request_id=rid, tier=tier, lam=10.0, embedding_model="e",
                                          embedding=np.full(dim, i, dtype=np.float32), chosen_model=model, propensity=p,
                                          outcome=OutcomeRecord(rid, cost_usd=1e-4)))  # fmt: skip
        with Session(engine) as s, s.begin():
            record_decisions(s, records)
            record_feedback(s, [FeedbackRecord(r.request_id, 1.0) for r in records])
    return written


def test_a_window_past_max_rows_keeps_every_strata_share_and_its_exact_propensities(engine):
    written = fill(engine, 3000, 4)
    with Session(engine) as s:
        ts = training_set(s, max_rows=600)
    assert ts.sampled_from == 3000 and abs(ts.n_rows - 600) <= len(TIERS) * len(MODELS)
    lg = ts.logged
    full = Counter((tier, model) for tier, model, _, _ in written.values())
    kept = Counter(zip(ts.tiers, (lg.model_names[a] for a in lg.action)))
    for stratum, count in full.items():  # every (tier, model) keeps a fifth of its rows, to the row
        assert abs(kept[stratum] - count / 5) <= 0.5 + 1e-9, (stratum, kept[stratum], count)
    for i, rid in enumerate(ts.request_ids):  # each kept row is the row that was written: propensity, embedding
        tier, model, p, first = written[rid]
        assert (ts.tiers[i], lg.model_names[lg.action[i]], lg.propensity[i], lg.X[i, 0]) == (tier, model, p, first)
    with Session(engine) as s:
        again = training_set(s, max_rows=600)
        everything = training_set(s)
    assert again.request_ids == ts.request_ids  # the same rows from run to run
    assert everything.sampled_from is None and everything.n_rows == 3000


def test_sample_rows_reads_only_ids_and_strata():
    ids = [f"id{i}" for i in range(1000)]
    strata = [("t", i % 4) for i in range(1000)]
    kept = sample_rows(ids, strata, 100)
    assert len(kept) == 100 and list(kept) == sorted(kept)
    assert Counter(strata[i] for i in kept) == {("t", k): 25 for k in range(4)}
    shuffled = np.random.default_rng(1).permutation(1000)  # the same requests in another order: the same ones kept
    again = sample_rows([ids[i] for i in shuffled], [strata[i] for i in shuffled], 100)
    assert sorted(ids[shuffled[i]] for i in again) == sorted(ids[i] for i in kept)
    assert list(sample_rows(ids, strata, 1000)) == list(range(1000))


def test_reading_a_window_holds_the_kept_embeddings_not_the_window_s(engine, monkeypatch):
    dim = 1024  # 4 KB a row: the window's embeddings are 16 MB
    fill(engine, 4000, dim)
    monkeypatch.setattr(training_window, "READ_CHUNK", 100)
    tracemalloc.start()
    try:
        with Session(engine) as s:
            ts = training_set(s, max_rows=200)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ts.n_rows == 200 and ts.logged.X.shape == (200, dim)
    assert peak < 4000 * dim * 4 / 2, f"peak {peak / 1e6:.1f} MB while reading a 16 MB window"


def test_each_row_carries_the_distribution_its_decision_was_drawn_from(engine):
    """A decision logged with every model's probability reads back as its row of ``distributions`` (a model it
    left out: 0; a model the window does not know: dropped); one logged without it reads as NaN."""
    spread = {"small": 0.9, "large": 0.0975, "gone": 0.0025}
    records = [DecisionRecord(request_id=rid, tier="gold", lam=1.0, embedding_model="e", embedding=np.ones(2, np.float32),
                              chosen_model=model, propensity=p, propensities=dist, outcome=OutcomeRecord(rid, cost_usd=1e-4))
               for rid, model, p, dist in (("a", "small", 0.9, spread), ("b", "large", 0.0975, spread),
                                           ("c", "small", 0.5, None))]  # fmt: skip
    with Session(engine) as s, s.begin():
        record_decisions(s, records)
        record_feedback(s, [FeedbackRecord(r.request_id, 1.0) for r in records])
    with Session(engine) as s:
        ts = training_set(s)
    names = ts.logged.model_names
    rows = {rid: dict(zip(names, ts.distributions[i])) for i, rid in enumerate(ts.request_ids)}
    assert rows["a"] == rows["b"] == {"large": 0.0975, "small": 0.9}
    assert all(np.isnan(v) for v in rows["c"].values())
