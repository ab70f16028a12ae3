"""The SQL of budget steering: a step is written only where nobody stepped since it was read, and each
model's cost per answer is read as a line in its prompt tokens."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from sqlalchemy.orm import Session

from regret_gateway.store.records import DecisionRecord, OutcomeRecord
from regret_gateway.store.steering import cost_lines, read_steering, write_steering
from regret_gateway.store.writes import record_decisions

DAY = datetime(2026, 11, 27, tzinfo=timezone.utc)


def step(position: float, at: datetime) -> dict:
    return {"period_start": DAY, "position": position, "lam": 100.0 * position, "state": "stepped", "updated_at": at,
            "period_mean": position}  # fmt: skip


def test_a_step_read_before_another_replica_stepped_is_not_written(engine):
    """Two replicas read the team's row; the first writes its step; the second's write, compared with the row
    it read, finds it changed: it is refused and the first replica's step holds. A first row inserted twice
    is refused the same way."""
    with Session(engine) as session:
        assert write_steering(session, "a", None, step(1.0, DAY))
    with Session(engine) as one, Session(engine) as two:
        seen_by_one, seen_by_two = read_steering(one, "a"), read_steering(two, "a")
        assert write_steering(one, "a", seen_by_one, step(1.5, DAY + timedelta(minutes=5)))
        assert not write_steering(two, "a", seen_by_two, step(0.5, DAY + timedelta(minutes=5)))
    with Session(engine) as session:
        held = read_steering(session, "a")
        assert held is not None and held.position == 1.5 and held.updated_at == DAY + timedelta(minutes=5)
        assert write_steering(session, "a", held, step(2.0, DAY + timedelta(minutes=10)))  # read afresh: written
    with Session(engine) as session:
        assert not write_steering(session, "a", None, step(0.0, DAY))  # a second first row
        assert read_steering(session, "a").position == 2.0  # type: ignore[union-attr]


def test_each_models_cost_is_fitted_as_a_line_in_the_prompts_tokens(engine):
    """`large` bills $10 per million prompt tokens plus ~$0.002 of output; `tiny` a flat ~$0.0001 whatever the
    prompt (the line's slope would fit below 0: the mean is kept); `small` has too few answers with a token
    count. Answers without a token count, failed ones and those older than the lookback are not read."""
    rng = np.random.default_rng(0)
    tokens = rng.integers(50, 20_000, size=300)
    rows, when = [], DAY - timedelta(hours=1)
    for i, n in enumerate(tokens):
        for model, cost, status, created in (
            ("large", 1e-5 * n + 0.002 + rng.normal(0, 2e-4), "success", when),
            ("tiny", 1e-4 + rng.normal(0, 1e-6), "success", when),
            ("large", 5.0, "failure", when),  # a failed answer: not a price
            ("large", 7.0, "success", DAY - timedelta(days=30)),  # past the lookback
        ):
            rid = f"{model}-{status}-{created:%d}-{i}"
            rows.append(DecisionRecord(request_id=rid, tier="standard", lam=100.0, embedding_model="m",
                                       embedding=np.zeros(2, dtype=np.float32), chosen_model=model, propensity=1.0,
                                       prompt_hash="h", created_at=created,
                                       outcome=OutcomeRecord(rid, cost_usd=max(cost, 0.0), status=status, prompt_tokens=int(n))))  # fmt: skip
    rows += [DecisionRecord(request_id=f"small-{i}", tier="standard", lam=100.0, embedding_model="m",
                            embedding=np.zeros(2, dtype=np.float32), chosen_model="small", propensity=1.0, prompt_hash="h",
                            created_at=when, outcome=OutcomeRecord(f"small-{i}", cost_usd=0.001, prompt_tokens=100 + i))
             for i in range(10)]  # fmt: skip
    rows += [DecisionRecord(request_id=f"untokened-{i}", tier="standard", lam=100.0, embedding_model="m",
                            embedding=np.zeros(2, dtype=np.float32), chosen_model="small", propensity=1.0, prompt_hash="h",
                            created_at=when, outcome=OutcomeRecord(f"untokened-{i}", cost_usd=0.001)) for i in range(50)]  # fmt: skip
    with Session(engine) as session, session.begin():
        record_decisions(session, rows)
    with Session(engine) as session:
        lines = cost_lines(session, ["tiny", "small", "large"], DAY)
    assert set(lines) == {"tiny", "large"}
    assert lines["large"].per_token == pytest.approx(1e-5, rel=0.02) and lines["large"].fixed == pytest.approx(0.002, abs=2e-4)
    assert lines["large"].rows == 300 and lines["large"].cost(100_000) == pytest.approx(1.002, rel=0.02)
    assert lines["tiny"].per_token >= 0 and lines["tiny"].cost(100_000) == pytest.approx(1e-4, rel=0.05)
