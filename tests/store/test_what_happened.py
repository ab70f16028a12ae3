"""The store keeps what really happened apart: a mock's answers (``serve --mock-upstream``), a stream the
client left, an answer a LiteLLM fallback's model gave for the routed one. None of them is a quality
observation of the chosen model; budgets charge what was really spent, at the answering model's price."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.store.queries import get_decision, team_spend, traffic_summary
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.steering import model_costs
from regret_gateway.store.training_set import training_set
from regret_gateway.store.writes import record_decisions, record_feedback

NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)


def decision(rid: str, model: str, *, cost: float, status: str = "success", answered: str | None = None,
             mock: bool = False) -> DecisionRecord:  # fmt: skip
    outcome = OutcomeRecord(rid, cost, status=status, answered_model=answered, prompt_tokens=10, completion_tokens=5,
                            created_at=NOW)  # fmt: skip
    return DecisionRecord(rid, "t", 0.0, "e", np.ones(4, dtype=np.float32), model, 0.5, team="team", created_at=NOW,
                          outcome=outcome, mock=mock)  # fmt: skip


def test_mock_left_and_fallback_rows_are_kept_out_of_training_and_budgets_charge_the_answering_model(engine):
    rows = [
        decision("real-a", "a", cost=1.0, answered="a"),
        decision("real-b", "b", cost=2.0),  # answered_model not reported: the chosen model's
        decision("mock-a", "a", cost=50.0, answered="a", mock=True),
        decision("left-a", "a", cost=0.25, status="client_left", answered="a"),
        decision("fell-c", "c", cost=1.5, answered="a"),  # c chosen, LiteLLM's fallback a answered
    ]
    with Session(engine) as session, session.begin():
        record_decisions(session, rows)
        record_feedback(session, [FeedbackRecord(r.request_id, 1.0, created_at=NOW) for r in rows])
    with Session(engine) as session:
        ts = training_set(session, model_names=("a", "b", "c"))
        spend, requests = team_spend(session, "team", NOW - timedelta(days=1))
        costs = model_costs(session, ["a", "b", "c"], NOW + timedelta(seconds=1))
        summary = traffic_summary(session)
        audit = get_decision(session, "fell-c")
    assert ts.request_ids == ("real-a", "real-b")
    assert (ts.skipped["mock"], ts.skipped["client_left"], ts.skipped["answered_by_other"]) == (1, 1, 1)
    assert (spend, requests) == (1.0 + 2.0 + 0.25 + 1.5, 4)  # the mock's $50 is no team's spend; the left stream's is
    assert costs == {"a": (1.0 + 1.5) / 2, "b": 2.0}  # the fallback's answer is a's cost, c has none; the mock's is out
    assert summary.mock == 1 and summary.answered_by_other == 1 and summary.by_status["client_left"] == 1
    assert any("mock answers" in line for line in summary.lines("in total"))
    assert audit is not None and audit.chosen_model == "c" and audit.outcome is not None and audit.outcome.answered_model == "a"


def test_logs_of_the_static_encoder_and_of_minilms_forward_pass_never_meet_in_one_fit(engine):
    """Each encoder is its own embedding id (and size): retrain's training set for the static encoder reads
    its rows only and counts MiniLM's as another embedder's, and the other way round."""
    from regret_gateway.config import EmbedderSpec

    static, minilm = EmbedderSpec(kind="static"), EmbedderSpec(kind="transformer")
    rows = [
        DecisionRecord(
            f"s{i}",
            "t",
            0.0,
            static.embedding_id,
            np.full(256, 0.1, dtype=np.float32),
            "ab"[i % 2],
            0.5,
            team="team",
            created_at=NOW,
            outcome=OutcomeRecord(f"s{i}", 1.0, created_at=NOW),
        )
        for i in range(6)
    ]
    rows += [DecisionRecord(f"m{i}", "t", 0.0, minilm.embedding_id, np.full(384, 0.1, dtype=np.float32), "ab"[i % 2], 0.5,
                            team="team", created_at=NOW, outcome=OutcomeRecord(f"m{i}", 1.0, created_at=NOW)) for i in range(4)]  # fmt: skip
    with Session(engine) as session, session.begin():
        record_decisions(session, rows)
        record_feedback(session, [FeedbackRecord(r.request_id, 1.0, created_at=NOW) for r in rows])
    with Session(engine) as session:
        for spec, n, other, dim in ((static, 6, 4, 256), (minilm, 4, 6, 384)):
            got = training_set(session, embedding_model=spec.embedding_id)
            assert got.logged is not None and got.logged.X.shape == (n, dim) and got.skipped["other_embedder"] == other
