"""Repository functions: round trips, idempotence, one current score, refusals that change nothing,
the training set as LoggedFeedback, export. Each test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from regret_gateway.data import FAVOURED_UNIFORM, FAVOURED_UNKNOWN
from regret_gateway.store.loggers import Logger
from regret_gateway.store.queries import get_decision, traffic_summary
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord, StoreInputError, UnknownRequestError
from regret_gateway.store.schema import Decision, Feedback, Outcome, RouterVersion
from regret_gateway.store.writes import record_decisions, record_feedback, record_outcomes, record_version
from regret_gateway.trainset.window import export_training_set, training_set

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def decision(i: int, *, model: str = "small", team: str = "a", dim: int = 4, outcome: bool = True, **kw) -> DecisionRecord:
    rid = f"r{i}"
    return DecisionRecord(
        request_id=rid,
        tier=kw.pop("tier", "standard"),
        lam=100.0,
        embedding_model="mini",
        embedding=np.full(dim, i, dtype=np.float32),
        chosen_model=model,
        propensity=kw.pop("propensity", 0.5),
        team=team,
        prompt_hash="h",
        created_at=T0 + timedelta(minutes=i),
        outcome=OutcomeRecord(request_id=rid, cost_usd=1e-4 * (i + 1), latency_ms=10.0) if outcome else None,
        **kw,
    )


def counts(session: Session) -> tuple[int, int, int]:
    return tuple(session.scalar(select(func.count()).select_from(t)) for t in (Decision, Outcome, Feedback))


def test_round_trip_and_idempotence(engine):
    with Session(engine) as s, s.begin():
        assert record_decisions(s, [decision(0, scores={"small": 0.7, "large": 0.2}), decision(1, model="large")]) == 2
    with Session(engine) as s, s.begin():
        # the same requests again (a replay after a commit in doubt): nothing new, nothing twice
        assert record_decisions(s, [decision(0), decision(1), decision(2)]) == 1
    with Session(engine) as s:
        assert counts(s) == (3, 3, 0)
        audit = get_decision(s, "r0")
    assert audit.chosen_model == "small" and audit.propensity == 0.5 and audit.scores == {"small": 0.7, "large": 0.2}
    assert audit.outcome.cost_usd == pytest.approx(1e-4) and audit.feedback is None
    with Session(engine) as s:
        row = s.get(Decision, "r1")
        assert np.array_equal(np.frombuffer(row.embedding, dtype="<f4"), np.full(4, 1, dtype=np.float32))


def test_every_field_is_stored_exactly(engine):
    """What the store holds is what was written, field by field (PostgreSQL takes batches by binary COPY):
    text with tabs, newlines, backslashes and non-ASCII, NULLs, microsecond timestamps, full-precision
    floats, JSON scores, the embedding's bytes."""
    when = datetime(2026, 11, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)
    rid = "r-\u00e9\\x"
    record = DecisionRecord(
        request_id=rid,
        tier="gold",
        lam=0.1 + 0.2,
        embedding_model="mini",
        embedding=np.array([1.5, -2.25e-7, 3.4e38, 0.0], dtype=np.float32),
        chosen_model="gpt-4o\tmini",
        propensity=1 / 3,
        team=None,
        router_version="v\\1",
        prompt_hash="h" * 64,
        prompt_text="line 1\nline\t2 \\N \u65e5\u672c\r",
        scores={"a": 0.25, "b\n": -1e-300},
        created_at=when,
        outcome=OutcomeRecord(
            request_id=rid,
            cost_usd=1.2345678901234e-5,
            prompt_tokens=2**31 - 1,
            completion_tokens=None,
            latency_ms=None,
            status="failure",
            error="upstream said \\N\tno",
            retries=3,
        ),  # fmt: skip
    )
    with Session(engine) as s, s.begin():
        assert record_decisions(s, [record]) == 1
    with Session(engine) as s:
        d, o = s.get(Decision, rid), s.get(Outcome, rid)
        assert (d.tier, d.lam, d.chosen_model, d.propensity, d.team, d.router_version, d.mode) == (
            "gold",
            0.1 + 0.2,
            "gpt-4o\tmini",
            1 / 3,
            None,
            "v\\1",
            "policy",
        )
        assert d.prompt_text == "line 1\nline\t2 \\N \u65e5\u672c\r" and d.scores == {"a": 0.25, "b\n": -1e-300}
        assert d.created_at.astimezone(timezone.utc) == when and d.embedding_dim == 4
        assert d.embedding == record.embedding.astype("<f4").tobytes()
        assert (o.cost_usd, o.prompt_tokens, o.completion_tokens, o.latency_ms, o.status, o.error, o.retries) == (
            1.2345678901234e-5, 2**31 - 1, None, None, "failure", "upstream said \\N\tno", 3)  # fmt: skip


def test_rescoring_keeps_one_current_score_per_source(engine):
    """A re-score replaces that source's score; the judge's score sits beside the user's, never over it."""
    with Session(engine) as s, s.begin():
        record_decisions(s, [decision(0)])
        record_feedback(s, [FeedbackRecord("r0", 0.2, source="user")])
    with Session(engine) as s, s.begin():
        record_feedback(s, [FeedbackRecord("r0", 0.9, source="judge", cost_usd=2e-4), FeedbackRecord("r0", 1.0, source="judge")])
    with Session(engine) as s, s.begin():
        record_feedback(s, [FeedbackRecord("r0", 0.3, source="user")])
    with Session(engine) as s:
        assert counts(s)[2] == 2
        audit = get_decision(s, "r0")
    assert audit.feedback.source == "user" and audit.feedback.score == 0.3  # the user's ranks first
    assert audit.feedback.revision == 2
    judge = audit.feedback_by_source["judge"]
    assert judge.score == 1.0 and judge.revision == 1 and judge.cost_usd is None  # the batch's last wins


def test_training_set_takes_each_request_s_best_ranked_source(engine):
    """Default: the user's score where there is one, the judge's otherwise; --feedback narrows and orders."""
    with Session(engine) as s, s.begin():
        record_decisions(s, [decision(i, model="small" if i % 2 else "large") for i in range(4)])
        record_feedback(s, [FeedbackRecord("r0", 1.0, source="user"), FeedbackRecord("r0", 0.0, source="judge"),
                            FeedbackRecord("r1", 0.5, source="judge"), FeedbackRecord("r2", 0.25, source="import")])  # fmt: skip
    with Session(engine) as s:
        names = ("large", "small")
        default = training_set(s, model_names=names)
        judge_first = training_set(s, model_names=names, feedback=("judge", "user"))
        user_only = training_set(s, model_names=names, feedback=("user",))
    assert default.request_ids == ("r0", "r1", "r2") and default.sources == ("user", "judge", "import")
    assert default.logged.quality.tolist() == [1.0, 0.5, 0.25] and default.skipped["no_feedback"] == 1
    assert judge_first.logged.quality.tolist() == [0.0, 0.5] and judge_first.rows_by_source() == {"judge": 2}
    assert user_only.request_ids == ("r0",) and user_only.skipped["no_feedback"] == 3


def test_traffic_summary_reports_sources_judge_spend_and_agreement(engine):
    with Session(engine) as s, s.begin():
        record_decisions(s, [decision(i) for i in range(4)])
        record_feedback(s, [FeedbackRecord("r0", 1.0, source="user"), FeedbackRecord("r0", 1.0, source="judge", cost_usd=1e-3),
                            FeedbackRecord("r1", 0.0, source="user"), FeedbackRecord("r1", 1.0, source="judge", cost_usd=2e-3),
                            FeedbackRecord("r2", 0.0, source="judge", cost_usd=5e-4)])  # fmt: skip
    with Session(engine) as s:
        summary = traffic_summary(s)
    assert summary.with_feedback == 3 and summary.feedback_coverage == 0.75
    assert summary.feedback_by_source["judge"].scored == 3 and summary.feedback_by_source["user"].scored == 2
    assert summary.judge_spend_usd == pytest.approx(3.5e-3)
    agree = summary.agreement
    assert agree.pairs == 2 and agree.same_side_of_half == 0.5 and agree.judge_minus_user == 0.5
    lines = summary.lines("in total")
    assert lines[0] == "requests in total: 4 (with outcome 4, with feedback 3 = 75.0%)"
    assert "judge vs user on 2 requests scored by both: same pass/fail (>= 0.5) 50.0%" in "\n".join(lines)


@pytest.mark.parametrize(
    "make_bad, message",
    [
        (lambda: FeedbackRecord("r0", 1.5), "`score` must be in [0, 1]"),
        (lambda: FeedbackRecord("r0", float("nan")), "`score` must be in [0, 1]"),
        (lambda: OutcomeRecord("r0", cost_usd=math.nan), "`cost_usd` must be a finite number >= 0"),
        (lambda: OutcomeRecord("r0", cost_usd=-1.0), "`cost_usd` must be a finite number >= 0"),
        (
            lambda: DecisionRecord(
                request_id="r9",
                tier="t",
                lam=1.0,
                embedding_model="mini",
                embedding=np.zeros(4),
                chosen_model="m",
                propensity=0.0,
            ),
            "`propensity` must be in (0, 1]",
        ),
    ],
)
def test_bad_records_are_refused_at_construction(make_bad, message):
    with pytest.raises(
        StoreInputError, match=message.replace("[", r"\[").replace("(", r"\(").replace("]", r"\]").replace(")", r"\)")
    ):
        make_bad()


def test_refused_batches_change_nothing(engine):
    with Session(engine) as s, s.begin():
        record_decisions(s, [decision(0), decision(1)])
        record_feedback(s, [FeedbackRecord("r0", 0.5)])
    with Session(engine) as s:
        before = counts(s)
    # unknown request id anywhere in a feedback batch: the whole batch is refused
    with Session(engine) as s, s.begin(), pytest.raises(UnknownRequestError, match="'nope'"):
        record_feedback(s, [FeedbackRecord("r1", 1.0), FeedbackRecord("nope", 1.0)])
    with Session(engine) as s, s.begin(), pytest.raises(UnknownRequestError):
        record_outcomes(s, [OutcomeRecord("ghost", cost_usd=0.1)])
    # wrong embedding size, against the store and within a batch
    with Session(engine) as s, s.begin(), pytest.raises(StoreInputError, match="has 4-d embeddings in the store, got 8-d"):
        record_decisions(s, [decision(5, dim=8)])
    with Session(engine) as s, s.begin(), pytest.raises(StoreInputError, match="embedding has 8 values"):
        record_decisions(s, [decision(6), decision(7, dim=8)])
    with Session(engine) as s:
        assert counts(s) == before
        assert get_decision(s, "r1").feedback is None and get_decision(s, "r0").feedback.score == 0.5


def test_the_training_set_says_what_each_row_s_logger_favoured(engine):
    """The off-policy weights read what each row's logger favoured (causal/ope.py): the router's greedy choice
    (also where exploration drew another model), the one model of a logger that did not randomise, the cold
    start's uniform draw, and nothing for a row whose greedy choice was not logged or is not a model here."""
    rows = [decision(0, model="large", mode="cold_start", app="chat"), decision(1, model="small", greedy_model="large"),
            decision(2, model="large", mode="exploration", propensity=0.01, greedy_model="small", app="chat"),
            decision(3, model="large", propensity=1.0), decision(4, model="small", app="code", tier="code"),
            decision(5, model="small", greedy_model="retired")]  # fmt: skip
    with Session(engine) as s, s.begin():
        record_decisions(s, rows)
        record_feedback(s, [FeedbackRecord(r.request_id, 1.0) for r in rows])
    with Session(engine) as s:
        ts = training_set(s, model_names=["large", "small"])
    assert ts.favoured.tolist() == [FAVOURED_UNIFORM, 0, 1, 0, FAVOURED_UNKNOWN, FAVOURED_UNKNOWN]
    # each tier is valued on the rows of the apps its own requests came from (no app: one app of its own)
    assert ts.apps == ("chat", None, "chat", None, "code", None)
    populations = ts.populations(["standard", "code", "new"])
    assert populations["code"].tolist() == [False, False, False, False, True, False]
    assert populations["standard"].tolist() == [True, True, True, True, False, True] and populations["new"].all()


def test_training_set_joins_filters_and_counts(engine):
    with Session(engine) as s, s.begin():
        record_decisions(
            s,
            [
                decision(i, model=("small", "large")[i % 2], team=("a", "b")[i % 2 == 0 and i >= 6],
                         router_version="v1" if i >= 4 else None)
                for i in range(10)
            ],
        )  # fmt: skip
        record_decisions(s, [decision(20, outcome=False)])  # no outcome yet
        # a later turn of a conversation kept on its model (p = 1, no draw): scored, and left out
        record_decisions(s, [decision(21, session_turn="kept", propensity=1.0)])
        record_decisions(
            s,
            [
                DecisionRecord(
                    request_id="f",
                    tier="standard",
                    lam=0.0,
                    embedding_model="mini",
                    embedding=np.zeros(4),
                    chosen_model="small",
                    propensity=1.0,
                    mode="fallback",
                    outcome=OutcomeRecord("f", cost_usd=0.0, status="failure", error="timeout"),
                )
            ],
        )
        record_feedback(s, [FeedbackRecord(f"r{i}", float(i % 3 == 0)) for i in (*range(8), 21)] + [FeedbackRecord("f", 0.0)])
    with Session(engine) as s:
        ts = training_set(s)
        assert ts.n_rows == 8 and ts.skipped == {
            "no_outcome": 1,
            "failed": 1,
            "client_left": 0,
            "answered_by_other": 0,
            "mock": 0,
            "embedding_dropped": 0,
            "no_feedback": 2,
            "untrusted": 0,
            "fallback": 0,
            "session_kept": 1,
            "other_embedder": 0,
            "unknown_model": 0,
        }
        lg = ts.logged
        assert lg.model_names == ("large", "small") and lg.X.shape == (8, 4)
        assert list(lg.action) == [1, 0, 1, 0, 1, 0, 1, 0] and list(lg.quality) == [1, 0, 0, 1, 0, 0, 1, 0]
        np.testing.assert_allclose(lg.cost, [1e-4 * (i + 1) for i in range(8)])
        assert np.all(lg.propensity == 0.5) and np.all(lg.lam == 100.0)
        assert ts.loggers == (Logger("standard", None),) * 4 + (Logger("standard", "v1"),) * 4  # rows r0-r7: v1 from r4
        assert ts.logger_codes().tolist() == [0] * 4 + [1] * 4
        assert np.array_equal(lg.X[:, 0], np.arange(8, dtype=np.float32))
        assert ts.router_versions == (None,) * 4 + ("v1",) * 4  # which policy logged each row (None: cold start)
        # team filter, time window and a fixed model list
        assert training_set(s, team="b", model_names=["large", "small"]).request_ids == ("r6",)
        assert training_set(s, since=T0 + timedelta(minutes=2), until=T0 + timedelta(minutes=5)).request_ids == ("r2", "r3", "r4")
        fixed = training_set(s, model_names=["small", "medium"])
        assert fixed.skipped["unknown_model"] == 4 and fixed.logged.counts().tolist() == [4, 0]


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_export_round_trip(engine, tmp_path, suffix):
    with Session(engine) as s, s.begin():
        record_decisions(s, [decision(i, model=("small", "large")[i % 2]) for i in range(6)])
        record_feedback(s, [FeedbackRecord(f"r{i}", i / 5) for i in range(6)])
    with Session(engine) as s:
        ts = training_set(s)
    path = export_training_set(ts, tmp_path / f"train{suffix}")
    pd = pytest.importorskip("pandas")
    df = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path)
    assert len(df) == 6 and list(df["request_id"]) == [f"r{i}" for i in range(6)]
    np.testing.assert_allclose(df["quality"], [i / 5 for i in range(6)])
    np.testing.assert_allclose(df[["x0", "x1", "x2", "x3"]].to_numpy(), ts.logged.X)
    assert list(df["model"]) == ["small", "large"] * 3


def test_published_versions_are_kept_as_a_history(engine):
    with Session(engine) as s, s.begin():
        record_version(s, "v1", "/art/v1", {"utility": 0.5})
    with Session(engine) as s, s.begin():
        record_version(s, "v2", "/art/v2", {"utility": 0.6})
    with Session(engine) as s:
        rows = s.scalars(select(RouterVersion).order_by(RouterVersion.created_at)).all()
        assert [(r.id, r.metrics["utility"]) for r in rows] == [("v1", 0.5), ("v2", 0.6)]


@pytest.mark.parametrize("request_id", ["has\x00nul", "x" * 300, ""])
def test_an_id_that_cannot_be_stored_is_unknown_not_an_error(engine, request_id):
    """A client's id with a NUL (PostgreSQL cannot even compare it) or of the wrong length is simply not
    in the store: the audit and feedback routes answer 404, never 500."""
    from regret_gateway.store.queries import decision_teams, get_decision

    with Session(engine) as s:
        assert decision_teams(s, [request_id]) == {} and get_decision(s, request_id) is None
    with pytest.raises(StoreInputError, match="NUL|<= 128 chars"):
        FeedbackRecord(request_id or "\x00", 1.0)


def test_a_teams_budget_counts_its_requests_in_the_current_period_only(engine):
    """Spend is the team's outcomes since the period's start (another team's, or last period's, are not
    counted); the projection extrapolates the last day's rate to the period's end."""
    from regret_gateway.budgets.periods import period_bounds
    from regret_gateway.budgets.status import budget_status
    from regret_gateway.config import BudgetSpec, Settings

    before = datetime(2026, 10, 31, 23, 0, tzinfo=timezone.utc)  # last month: not this period
    with Session(engine) as s, s.begin():
        record_decisions(s, [decision(i) for i in range(4)])  # team a, Nov 1 00:00-00:03, $0.0001-$0.0004
        record_decisions(s, [decision(9, team="b"), dataclasses.replace(decision(10), created_at=before)])
    now = T0 + timedelta(hours=12)
    with Session(engine) as s:
        settings = Settings(models=("small", "large"), default_tier="standard", tiers={"standard": {"lam": 100.0}},
                            teams={"a": {"tier": "standard", "budget": {"usd": 0.002, "per": "month"}}})  # fmt: skip
        status = budget_status(s, settings, "a", now)
    assert status.budget == BudgetSpec(usd=0.002, per="month") and status.lam == 100.0
    assert (status.start, status.end) == period_bounds("month", now) == (T0, datetime(2026, 12, 1, tzinfo=timezone.utc))
    assert status.requests == 4 and status.spent_usd == pytest.approx(1e-3)
    # $0.001 in the 12 hours so far, the rest of November (29.5 days) at that rate
    assert status.projected_usd == pytest.approx(1e-3 + 1e-3 / 12 * (29.5 * 24))
    line = status.line()
    assert "budget $0.002 per month" in line and "spent $0.001 (50.0%) on 4 requests" in line and "projected over" in line


def test_the_projection_prices_the_requests_the_controller_expects_not_the_rate_so_far(engine):
    """On a daily budget at 06:00, the projection expects as many requests as the rest of the team's day
    before held (its busy hours are ahead), each at what its requests of the day so far cost: not the quiet
    night's rate carried on to midnight."""
    from regret_gateway.budgets.status import budget_status
    from regret_gateway.config import Settings

    def at(i: int, when: datetime) -> DecisionRecord:  # a request costing $0.001
        d = dataclasses.replace(decision(i), created_at=when)
        return dataclasses.replace(d, outcome=dataclasses.replace(d.outcome, cost_usd=1e-3))

    day0, day1 = T0, T0 + timedelta(days=1)
    yesterday = [at(i, day0 + timedelta(hours=1 + i)) for i in range(2)]  # 2 at night ...
    yesterday += [at(10 + i, day0 + timedelta(hours=8, minutes=30 * i)) for i in range(10)]  # ... 10 from 08:00
    with Session(engine) as s, s.begin():
        record_decisions(s, yesterday + [at(20 + i, day1 + timedelta(hours=1 + i)) for i in range(2)])
    settings = Settings(models=("small", "large"), default_tier="standard", tiers={"standard": {"lam": 100.0}},
                        teams={"a": {"tier": "standard", "budget": {"usd": 0.011, "per": "day"}}})  # fmt: skip
    with Session(engine) as s:
        status = budget_status(s, settings, "a", day1 + timedelta(hours=6))
    assert status.spent_usd == pytest.approx(2e-3) and status.expected_requests == 10
    # today's requests so far cost $0.001 each and 10 more are expected: $0.012, over the $0.011 budget
    assert status.projected_usd == pytest.approx(2e-3 + 10 * 1e-3)
    assert "projected over" in status.line()


def test_two_batches_of_the_same_scores_in_opposite_orders_never_deadlock(engine):
    """Two clients post the same request ids' scores at once, in opposite orders: on PostgreSQL each batch locks
    its rows in the order it writes them, so the writes are made in one order whoever sends them -- the second
    waits for the first, neither is aborted as a deadlock (SQLite writes one transaction at a time)."""
    import threading

    if engine.dialect.name != "postgresql":
        pytest.skip("row locks: PostgreSQL's")
    n = 400
    with Session(engine) as s, s.begin():
        record_decisions(s, [decision(i) for i in range(n)])
    failures: list[BaseException] = []

    def post(order, score: float, start: threading.Barrier) -> None:
        batch = [FeedbackRecord(f"r{i}", score) for i in order]
        start.wait()
        try:
            with Session(engine) as s, s.begin():
                record_feedback(s, batch)
        except BaseException as exc:  # noqa: BLE001 - collected, asserted below
            failures.append(exc)

    for attempt in range(5):
        start = threading.Barrier(2)
        score = 0.5 + 0.1 * (attempt % 2)
        threads = [threading.Thread(target=post, args=(order, score, start)) for order in (range(n), range(n - 1, -1, -1))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []
    with Session(engine) as s:
        assert s.scalar(select(func.max(Feedback.revision))) == 10  # every batch applied, one after the other


def test_a_failure_after_the_answer_replaces_the_logged_success_and_keeps_its_cost(engine):
    """The proxy may fail a request after LiteLLM's success event (its own checks of the answer): the client got
    an error, so a later ``failure`` outcome replaces the success -- written alone, or in the same batch as the
    decision with its success -- and the answer's cost stays (the upstream was paid). A later success never
    replaces a failure."""
    failed = OutcomeRecord(request_id="r0", cost_usd=0.0, status="failure", error="ValidationError: bad model_info")
    with Session(engine) as s, s.begin():
        record_decisions(s, [decision(0), decision(1)])
    with Session(engine) as s, s.begin():
        assert record_outcomes(s, [failed]) == 0  # no new row: the stored one changes
    with Session(engine) as s, s.begin():
        both = dataclasses.replace(decision(2), outcome=None)
        record_decisions(s, [decision(2), dataclasses.replace(both, outcome=dataclasses.replace(failed, request_id="r2"))])
        record_outcomes(s, [OutcomeRecord(request_id="r1", cost_usd=0.0, status="failure", error="e1")])
        record_outcomes(s, [OutcomeRecord(request_id="r1", cost_usd=1.0, status="success")])  # too late: stays failed
    with Session(engine) as s:
        r0, r1, r2 = (get_decision(s, f"r{i}").outcome for i in range(3))
    assert (r0.status, r0.error, r0.cost_usd) == ("failure", "ValidationError: bad model_info", pytest.approx(1e-4))
    assert (r1.status, r1.error, r1.cost_usd) == ("failure", "e1", pytest.approx(2e-4))
    assert (r2.status, r2.cost_usd) == ("failure", pytest.approx(3e-4))
