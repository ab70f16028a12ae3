"""Reads for the audit route and ``status``: one request's decision, outcome and scores, its team, and the
traffic summary; how scores from several sources rank."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from regret_gateway.data import JUDGE_REPEAT_SOURCE, JUDGE_SOURCE, USER_SOURCE
from regret_gateway.store.records import (
    valid_request_id,
)
from regret_gateway.store.schema import Decision, Feedback, Outcome
from regret_gateway.store.writes import ID_CHUNK, chunks


def source_rank(sources: Sequence[str] | None) -> Callable[[str], int | None]:
    """How a request's scores from several sources are ranked: ``sources`` in that order (others
    ignored), or, with None, every source -- ``user`` first, the judge last, the rest by name between --
    but the judge's repeat scores, which only measure its self-agreement (None: never a request's score)."""
    if sources is not None:
        order = {src: i for i, src in enumerate(sources)}
        return order.get
    return lambda src: 0 if src == USER_SOURCE else 2 if src == JUDGE_SOURCE else None if src == JUDGE_REPEAT_SOURCE else 1


@dataclass(frozen=True)
class FeedbackView:
    """One source's quality score of a request, as the audit route shows it."""

    score: float
    source: str
    revision: int  # 1 + the number of re-scorings
    updated_at: str  # ISO 8601
    cost_usd: float | None  # what producing the score cost (the judge's call)

    @classmethod
    def of(cls, f: Feedback) -> "FeedbackView":
        return cls(f.score, f.source, f.revision, f.updated_at.isoformat(), f.cost_usd)


@dataclass(frozen=True)
class OutcomeView:
    """What the upstream call of a request cost and how it ended."""

    cost_usd: float
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float | None
    status: str
    error: str | None
    retries: int | None  # failed upstream attempts before the one the client got
    answered_model: str | None  # the model group that answered (a LiteLLM fallback's, where not the chosen model)

    @classmethod
    def of(cls, o: Outcome) -> "OutcomeView":
        return cls(o.cost_usd, o.prompt_tokens, o.completion_tokens, o.latency_ms, o.status, o.error, o.retries,
                   o.answered_model)  # fmt: skip


@dataclass(frozen=True)
class DecisionView:
    """The audit view of one request (``GET /regret/decisions/{id}``'s response): its decision, outcome and
    scores. ``feedback`` is the score retrain takes by default (:func:`source_rank`), ``feedback_by_source``
    every source's, best-ranked first."""

    request_id: str
    created_at: str  # ISO 8601
    team: str | None
    tier: str
    lam: float
    router_version: str | None
    chosen_model: str
    propensity: float | None
    mode: str
    scores: dict | None  # the router's per-model scores
    embedding_model: str
    mock: bool  # answered by `serve --mock-upstream`'s mock
    session_turn: str | None  # first | kept | rerouted: which turn of a conversation (None: not one)
    greedy_model: str | None  # the router's choice before exploration (None: no router chose)
    app: str | None  # the app it came from (a keyed hash of its system prompt; None: none)
    outcome: OutcomeView | None
    feedback: FeedbackView | None
    feedback_by_source: dict[str, FeedbackView]


def get_decision(session: Session, request_id: str) -> DecisionView | None:
    """The audit view of one request (None if unknown)."""
    if not valid_request_id(request_id):
        return None
    row = session.execute(
        select(Decision, Outcome)
        .select_from(Decision)
        .outerjoin(Outcome, Outcome.request_id == Decision.request_id)
        .where(Decision.request_id == request_id)
    ).first()
    if row is None:
        return None
    d, o = row
    rank = source_rank(None)
    scores = sorted(
        session.scalars(select(Feedback).where(Feedback.request_id == request_id)), key=lambda f: (rank(f.source), f.source)
    )
    by_source = {f.source: FeedbackView.of(f) for f in scores}
    return DecisionView(
        request_id=d.request_id,
        created_at=d.created_at.isoformat(),
        team=d.team,
        tier=d.tier,
        lam=d.lam,
        router_version=d.router_version,
        chosen_model=d.chosen_model,
        propensity=d.propensity,
        mode=d.mode,
        scores=d.scores,
        embedding_model=d.embedding_model,
        mock=bool(d.mock),
        session_turn=d.session_turn,
        greedy_model=d.greedy_model,
        app=d.app,
        outcome=None if o is None else OutcomeView.of(o),
        feedback=next(iter(by_source.values()), None),
        feedback_by_source=by_source,
    )


def decision_teams(session: Session, request_ids: Sequence[str]) -> dict[str, str | None]:
    """The team of each stored request among ``request_ids`` (an id the store does not hold is left out)."""
    ids = sorted({r for r in request_ids if valid_request_id(r)})
    out: dict[str, str | None] = {}
    for chunk in chunks(ids, ID_CHUNK):
        out.update(
            {
                rid: team
                for rid, team in session.execute(select(Decision.request_id, Decision.team).where(Decision.request_id.in_(chunk)))
            }
        )
    return out


@dataclass(frozen=True)
class SourceCoverage:
    """The requests one quality source scored: how many, their share of all requests, what scoring cost."""

    scored: int
    coverage: float
    cost_usd: float


@dataclass(frozen=True)
class JudgeAgreement:
    """How the LLM judge's scores agree with the users' on the requests both scored (None: no such pair)."""

    pairs: int
    mean_abs_diff: float | None = None
    same_side_of_half: float | None = None  # share with the same pass/fail (>= 0.5)
    judge_minus_user: float | None = None  # > 0: the judge is more lenient


@dataclass(frozen=True)
class TrafficSummary:
    """What `regret-gateway status` reports of the logged traffic (in a window)."""

    requests: int
    with_outcome: int
    with_feedback: int
    feedback_by_source: dict[str, SourceCoverage]
    agreement: JudgeAgreement
    by_mode: dict[str, int]
    by_tier: dict[str, int]
    by_status: dict[str, int]  # outcomes by status: success, failure, client_left (a stream the client closed)
    answered_by_other: int = 0  # successes a LiteLLM fallback's model answered (not the router's choice)
    mock: int = 0  # requests `serve --mock-upstream`'s mock answered (never training data or budget spend)

    @property
    def feedback_coverage(self) -> float:
        return self.with_feedback / self.requests if self.requests else 0.0

    @property
    def judge_spend_usd(self) -> float:
        return sum(s.cost_usd for src, s in self.feedback_by_source.items() if src in (JUDGE_SOURCE, JUDGE_REPEAT_SOURCE))

    def lines(self, label: str) -> list[str]:
        """The status report, one line per fact; ``label`` says which requests (e.g. "in total")."""
        out = [
            f"requests {label}: {self.requests} (with outcome {self.with_outcome}, "
            f"with feedback {self.with_feedback} = {100 * self.feedback_coverage:.1f}%)"
        ]
        for src, info in sorted(self.feedback_by_source.items()):
            spend = f", spend ${info.cost_usd:.4f}" if info.cost_usd else ""
            out.append(f"  feedback from {src}: {info.scored} = {100 * info.coverage:.1f}%{spend}")
        a = self.agreement
        if a.pairs:
            out.append(f"judge vs user on {a.pairs} requests scored by both: same pass/fail (>= 0.5) "
                       f"{100 * (a.same_side_of_half or 0.0):.1f}%, mean |difference| {a.mean_abs_diff:.3f}, "
                       f"judge - user {a.judge_minus_user:+.3f}")  # fmt: skip
        elif JUDGE_SOURCE in self.feedback_by_source:
            out.append("judge vs user: no request scored by both yet (the evidence that the judge can be trusted here)")
        out.append("by mode: " + ", ".join(f"{k}={v}" for k, v in self.by_mode.items()))
        out.append("by tier: " + ", ".join(f"{k}={v}" for k, v in self.by_tier.items()))
        out.append("outcomes: " + ", ".join(f"{k}={v}" for k, v in sorted(self.by_status.items()))
                   + f"; answered by a LiteLLM fallback's model {self.answered_by_other}")  # fmt: skip
        if self.mock:
            out.append(f"mock answers (serve --mock-upstream; not trained on, not budget spend): {self.mock}")
        return out


def scored_by_both(session: Session, first: str, second: str, window: Sequence = ()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The requests of ``window`` (conditions on :class:`Decision`) that sources ``first`` and ``second`` both
    scored: (models that answered, ``first``'s scores, ``second``'s scores), each (k,)."""
    from sqlalchemy.orm import aliased

    a, b = aliased(Feedback), aliased(Feedback)
    rows = session.execute(
        select(func.coalesce(Outcome.answered_model, Decision.chosen_model), a.score, b.score)
        .select_from(Decision)
        .outerjoin(Outcome, Outcome.request_id == Decision.request_id)
        .join(a, (a.request_id == Decision.request_id) & (a.source == first))
        .join(b, (b.request_id == Decision.request_id) & (b.source == second))
        .where(*window)
    ).all()
    models = np.array([r[0] for r in rows], dtype=object)
    scores = np.array([(r[1], r[2]) for r in rows], dtype=float).reshape(-1, 2)
    return models, scores[:, 0], scores[:, 1]


def judged_by_users(session: Session, window: Sequence = ()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The requests a user and the judge both scored: (models judged, user scores, judge scores)."""
    return scored_by_both(session, USER_SOURCE, JUDGE_SOURCE, window)


def traffic_summary(session: Session, *, since: datetime | None = None) -> TrafficSummary:
    """Counts for `regret-gateway status`: requests, outcomes, feedback coverage (in all and by source),
    the judge's spend, and how judge and user scores agree where a request has both."""

    where = [] if since is None else [Decision.created_at >= since]
    total = session.scalar(select(func.count()).select_from(Decision).where(*where)) or 0
    outcome = session.scalar(select(func.count()).select_from(Decision).join(Outcome).where(*where)) or 0
    scored = session.scalar(select(func.count(func.distinct(Feedback.request_id))).join(Decision).where(*where)) or 0
    by_mode = dict(session.execute(select(Decision.mode, func.count()).where(*where).group_by(Decision.mode)).all())
    by_tier = dict(session.execute(select(Decision.tier, func.count()).where(*where).group_by(Decision.tier)).all())
    by_source = {
        src: SourceCoverage(int(n), n / total if total else 0.0, float(cost or 0.0))
        for src, n, cost in session.execute(
            select(Feedback.source, func.count(), func.sum(Feedback.cost_usd))
            .join(Decision)
            .where(*where)
            .group_by(Feedback.source)
        )
    }
    _, u, j = judged_by_users(session, where)
    agreement = JudgeAgreement(0)
    if len(u):
        agreement = JudgeAgreement(len(u), float(np.abs(u - j).mean()), float(((u >= 0.5) == (j >= 0.5)).mean()),
                                   float((j - u).mean()))  # fmt: skip
    by_status = dict(session.execute(select(Outcome.status, func.count()).join(Decision).where(*where)
                                     .group_by(Outcome.status)).all())  # fmt: skip
    other = session.scalar(select(func.count()).select_from(Decision).join(Outcome).where(
        *where, Outcome.answered_model.is_not(None), Outcome.answered_model != Decision.chosen_model)) or 0  # fmt: skip
    mock = session.scalar(select(func.count()).select_from(Decision).where(*where, Decision.mock.is_(True))) or 0
    return TrafficSummary(total, outcome, scored, by_source, agreement, by_mode, by_tier, by_status, int(other), int(mock))


def team_spend(session: Session, team: str, since: datetime, until: datetime | None = None) -> tuple[float, int]:
    """(dollars, requests): what the outcomes of ``team``'s requests made in [since, until) cost -- at the
    price of the model that answered (LiteLLM's ``response_cost``; a stream the client left is charged what
    it streamed) -- leaving out the mock's answers of ``serve --mock-upstream``."""

    where = [Decision.team == team, Decision.created_at >= since, Decision.mock.is_(False)]
    if until is not None:
        where.append(Decision.created_at < until)
    usd, n = session.execute(
        select(func.sum(Outcome.cost_usd), func.count()).select_from(Decision).join(Outcome).where(*where)
    ).one()
    return float(usd or 0.0), int(n)


def left_out_of_usage(session: Session, since: datetime, until: datetime, team: str | None = None) -> dict[str, int]:
    """The requests made in [since, until) that :func:`daily_usage` leaves out, by why: ``mock`` (answered by
    the mock of ``serve --mock-upstream``: no real spend) and ``no_outcome`` (no answer logged yet)."""
    where = [Decision.created_at >= since, Decision.created_at < until]
    if team is not None:
        where.append(Decision.team == team)
    mock = session.scalar(select(func.count()).select_from(Decision).where(*where, Decision.mock.is_(True))) or 0
    pending = (
        session.scalar(
            select(func.count()).select_from(Decision).outerjoin(Outcome)
            .where(*where, Decision.mock.is_(False), Outcome.request_id.is_(None))
        )
        or 0
    )  # fmt: skip
    return {"mock": int(mock), "no_outcome": int(pending)}


def daily_usage(session: Session, since: datetime, until: datetime, team: str | None = None):
    """(team, tier, UTC day as ``YYYY-MM-DD``, model, requests, cost) of the requests made in [since, until)
    that have an outcome (only ``team``'s where given), summed in the database per team, tier, day and the
    model that answered (the chosen one where no other did), leaving out the mock's answers of ``serve
    --mock-upstream``."""
    where = [Decision.created_at >= since, Decision.created_at < until, Decision.mock.is_(False)]
    if team is not None:
        where.append(Decision.team == team)
    utc = Decision.created_at if session.get_bind().dialect.name == "sqlite" else func.timezone("UTC", Decision.created_at)
    day = func.date(utc)  # SQLite stores the UTC wall clock; PostgreSQL a timestamptz, read in UTC here
    model = func.coalesce(Outcome.answered_model, Decision.chosen_model)
    q = (
        select(Decision.team, Decision.tier, day, model, func.count(), func.sum(Outcome.cost_usd))
        .select_from(Decision).join(Outcome).where(*where).group_by(Decision.team, Decision.tier, day, model)
    )  # fmt: skip
    for who, tier, on, answered, n, cost in session.execute(q):
        yield who, tier, on if isinstance(on, str) else on.isoformat(), answered, int(n), float(cost or 0.0)
