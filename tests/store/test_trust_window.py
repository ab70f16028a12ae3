"""Retrain's window under the default trust check (SQLite and PostgreSQL): teams whose apps differ all
train; a team flagged within its app against a reference is left out (without one, the app is disputed),
and the rows it alone scored say so (``untrusted``, not ``no_feedback``)."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.config import TrustSpec
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.writes import record_decisions, record_feedback
from regret_gateway.trainset.window import training_set

NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
GOOD = {"chat": {"a": 0.9, "b": 0.3}, "code": {"a": 0.2, "b": 0.8}}  # each app's chance of a good answer per model


def write(engine, team: str, app: str, n: int, rng, *, attack: bool = False) -> None:
    models = rng.choice(["a", "b"], n)
    rows = [DecisionRecord(f"{team}-{i}", "t", 0.0, "e", np.ones(4, dtype=np.float32), str(m), 0.5, team=team, app=app,
                           created_at=NOW, outcome=OutcomeRecord(f"{team}-{i}", 0.001))
            for i, m in enumerate(models)]  # fmt: skip
    scores = [float(m == "a") if attack else float(rng.random() < GOOD[app][str(m)]) for m in models]
    with Session(engine) as session, session.begin():
        record_decisions(session, rows)
        record_feedback(session, [FeedbackRecord(r.request_id, s) for r, s in zip(rows, scores)])


def test_teams_on_different_apps_all_train_under_the_default_trust_check(engine):
    rng = np.random.default_rng(0)
    write(engine, "chat-team", "chat", 300, rng)
    write(engine, "code-team", "code", 300, rng)
    with Session(engine) as session:
        ts = training_set(session, trust=TrustSpec())
    assert ts.n_rows == 600 and ts.skipped["untrusted"] == 0
    assert {c.verdict for c in ts.team_checks.values()} == {"trusted"}


def test_the_rows_only_a_flagged_team_scored_are_left_out_as_untrusted(engine):
    rng = np.random.default_rng(1)
    write(engine, "h1", "code", 300, rng)
    write(engine, "h2", "code", 300, rng)
    write(engine, "x", "code", 300, rng, attack=True)
    with Session(engine) as session:
        ts = training_set(session, trust=TrustSpec(reference=("h1",)))
        disputed = training_set(session, trust=TrustSpec())  # no reference: three teams, no vote
    assert ts.team_checks["x"].kept == 0 and ts.team_checks["x"].app == "code"
    assert ts.team_checks["h1"].verdict == "reference" and ts.team_checks["h2"].verdict == "trusted"
    assert ts.n_rows == 600 and ts.skipped["untrusted"] == 300 and ts.skipped["no_feedback"] == 0
    assert disputed.n_rows == 0 and disputed.skipped["untrusted"] == 900


def test_a_retrain_refused_because_no_score_may_train_names_the_trust_check():
    import pytest

    from regret_gateway.retrain.checks import check_data
    from regret_gateway.retrain.options import RetrainOptions, RetrainRefused

    skipped = {"no_feedback": 3, "untrusted": 40}
    with pytest.raises(RetrainRefused, match="40 were scored only by teams the trust check left out"):
        check_data(None, skipped, RetrainOptions())
