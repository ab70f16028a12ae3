"""The store keeps what really happened apart: a mock's answers (``serve --mock-upstream``), a stream the
client left, an answer a LiteLLM fallback's model gave for the routed one. None of them is a quality
observation of the chosen model; budgets charge what was really spent, at the answering model's price."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.store.queries import get_decision, team_spend, traffic_summary
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.steering import model_costs
from regret_gateway.store.writes import record_decisions, record_feedback
from regret_gateway.trainset.window import training_set

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


def test_a_row_is_left_out_of_training_for_the_same_reason_scored_or_not(engine):
    """Unscored rows are counted in the database, scored ones one by one: each reason counts both alike."""
    kinds = [dict(cost=1.0), dict(cost=1.0, mock=True), dict(cost=0.5, status="client_left"),
             dict(cost=0.0, status="failure"), dict(cost=1.0, answered="b")]  # fmt: skip
    rows = [decision(f"{s}{i}", "a", **kw) for s in ("scored-", "unscored-") for i, kw in enumerate(kinds)]
    pending = [DecisionRecord(f"{s}pending", "t", 0.0, "e", np.ones(4, dtype=np.float32), "a", 0.5, created_at=NOW)
               for s in ("scored-", "unscored-")]  # fmt: skip
    with Session(engine) as session, session.begin():
        record_decisions(session, rows + pending)
        record_feedback(session, [FeedbackRecord(r.request_id, 1.0, created_at=NOW) for r in rows + pending
                                  if r.request_id.startswith("scored-")])  # fmt: skip
    with Session(engine) as session:
        ts = training_set(session, model_names=("a", "b"))
    assert ts.request_ids == ("scored-0",) and ts.logged is not None and ts.logged.X.shape == (1, 4)
    assert {k: n for k, n in ts.skipped.items() if n} == {
        "mock": 2, "client_left": 2, "failed": 2, "answered_by_other": 2, "no_outcome": 2, "no_feedback": 1
    }  # fmt: skip


def test_the_report_counts_each_utc_day_s_spend_and_requests_by_the_model_that_answered(engine):
    """The report's usage is summed in the database: per UTC day (a request at 23:30 UTC is that day's,
    whatever the server's zone), by the model that answered, the mock's answers left out."""
    from regret_gateway.config import Settings, TierSpec
    from regret_gateway.savings.report import savings_report

    late, early = NOW.replace(hour=23, minute=30), NOW.replace(hour=0, minute=30) + timedelta(days=1)
    rows = [decision("d1-a", "a", cost=1.0), decision("d1-c", "c", cost=2.0, answered="a"),
            decision("d1-mock", "a", cost=50.0, mock=True), decision("d2-b", "b", cost=4.0)]  # fmt: skip
    at = {"d1-c": late, "d2-b": early}
    rows = [replace(r, created_at=at.get(r.request_id, r.created_at)) for r in rows]
    with Session(engine) as session, session.begin():
        record_decisions(session, rows)
    settings = Settings(models=("a", "b", "c"), tiers={"t": TierSpec(lam=0.0)}, default_tier="t")
    with Session(engine) as session:
        report = savings_report(settings, session, NOW - timedelta(days=1), NOW + timedelta(days=2))
    (team,) = report.teams
    assert (team.requests, team.spend_usd) == (3, 7.0) and report.left_out["mock"] == 1
    assert team.days == ["2026-12-01", "2026-12-02"] and team.daily_spend == [3.0, 4.0]
    assert team.daily_mix == [{"a": 2}, {"b": 1}]
