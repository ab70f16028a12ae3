"""A window's raw rows as retrain reads them: every score of the window's requests, the scored decisions one by
one (without their embeddings), the unscored ones counted by why they could not train anyway, and the
embeddings of the rows retrain keeps, fetched by id. What is usable, and why a row is not, is decided on these
rows by :mod:`regret_gateway.trainset.window`; this module holds the store's reads (:class:`StoreRows`) and what
every source of rows answers (:class:`RowSource`: the store here, Parquet day parts in
:mod:`regret_gateway.store.parts`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import NamedTuple, Protocol

import numpy as np
from sqlalchemy import Text, and_, case, cast, func, select
from sqlalchemy.orm import Session

from regret_gateway.store.schema import Decision, Feedback, Outcome, embedded
from regret_gateway.store.writes import ID_CHUNK, chunks

READ_CHUNK = 10_000  # rows fetched at a time (a server-side cursor on PostgreSQL)
# Why a decision's outcome keeps it from training, in the order they are decided: ``mock`` (``serve
# --mock-upstream`` answered, not the model), ``no_outcome``, ``client_left`` (a stream the client closed: its
# cost is real, its answer not whole), ``failed``, ``answered_by_other`` (a LiteLLM fallback's model answered).
OUTCOME_REASONS = ("mock", "no_outcome", "client_left", "failed", "answered_by_other")
# Why a scored decision cannot train though its outcome could: its embedding was dropped, unscored past the score
# window (store.retention.drop_embeddings) -- the score came later.
EMBEDDING_DROPPED = "embedding_dropped"


class ScoreRow(NamedTuple):
    """One source's current score of a request of the window."""

    request_id: str
    source: str
    score: float
    cost: float | None  # what producing the score cost (the judge's call)
    team: str | None
    answered: str  # the model whose answer was scored (a LiteLLM fallback's, else the chosen model)
    app: str | None


class DecisionRow(NamedTuple):
    """A scored decision of the window, with its outcome, without its embedding."""

    request_id: str
    created_at: datetime  # naive, UTC
    team: str | None
    tier: str
    lam: float
    embedding_model: str
    embedding_dim: int
    chosen_model: str
    propensity: float | None
    mode: str
    router_version: str | None
    cost_usd: float | None
    reason: str | None  # one of OUTCOME_REASONS or EMBEDDING_DROPPED, None where it may train
    session_turn: str | None
    greedy_model: str | None
    app: str | None
    propensities: str | None  # JSON text: every model's probability where the decision was drawn (None, 'null': not logged)


@dataclass(frozen=True)
class WindowRows:
    """What a window holds for retrain: ``scores`` (every current score of its requests), ``scored`` (its scored
    decisions) and ``unscored`` (its other decisions counted by their outcome's reason, ``None`` where the
    outcome would have let them train)."""

    scores: list[ScoreRow]
    scored: list[DecisionRow]
    unscored: dict[str | None, int]


class RowSource(Protocol):
    """Where a window's rows come from: the store (:class:`StoreRows`) or Parquet day parts."""

    def window(self, since: datetime | None, until: datetime | None, team: str | None) -> WindowRows:
        """The rows of the decisions made in [since, until) (None: unbounded) by ``team`` (None: every team)."""
        ...

    def embeddings(self, ids: Sequence[str], dim: int) -> np.ndarray:
        """(k, dim) float32: the embeddings of the request ids ``ids``, in their order."""
        ...


class StoreRows:
    """A window's rows read from the store: the scored decisions one by one, the rest counted in the database."""

    def __init__(self, session: Session):
        self.session = session

    def window(self, since: datetime | None, until: datetime | None, team: str | None) -> WindowRows:
        where = []
        if since is not None:
            where.append(Decision.created_at >= since)
        if until is not None:
            where.append(Decision.created_at < until)
        if team is not None:
            where.append(Decision.team == team)
        reason = outcome_reason().label("reason")
        dropped = case((~embedded(), EMBEDDING_DROPPED), else_=None)
        scored = (
            select(Decision.request_id, Decision.created_at, Decision.team, Decision.tier, Decision.lam,
                   Decision.embedding_model, Decision.embedding_dim, Decision.chosen_model, Decision.propensity,
                   Decision.mode, Decision.router_version, Outcome.cost_usd,
                   func.coalesce(outcome_reason(), dropped).label("reason"), Decision.session_turn,
                   Decision.greedy_model, Decision.app, as_text(Decision.propensities))
            .select_from(Decision)
            .join(ids := select(Feedback.request_id).distinct().subquery(), ids.c.request_id == Decision.request_id)
            .outerjoin(Outcome, Outcome.request_id == Decision.request_id)
            .where(*where)
        )  # fmt: skip
        unscored = (
            select(reason, func.count())
            .select_from(Decision).outerjoin(Outcome, Outcome.request_id == Decision.request_id)
            .where(*where, ~select(Feedback.request_id).where(Feedback.request_id == Decision.request_id).exists())
            .group_by(reason)
        )  # fmt: skip
        return WindowRows(
            scores=scores_of(self.session, where),
            scored=[DecisionRow(*(naive_utc(r[1]) if i == 1 else v for i, v in enumerate(r)))  # type: ignore[arg-type]
                    for r in self.session.execute(scored.execution_options(yield_per=READ_CHUNK))],
            unscored={r: int(n) for r, n in self.session.execute(unscored)},
        )  # fmt: skip

    def embeddings(self, ids: Sequence[str], dim: int) -> np.ndarray:
        X = np.empty((len(ids), dim), dtype=np.float32)
        position = {r: i for i, r in enumerate(ids)}
        found = 0
        for chunk in chunks(list(ids), ID_CHUNK):
            for rid, blob in self.session.execute(
                select(Decision.request_id, Decision.embedding).where(Decision.request_id.in_(chunk))
            ):
                if blob:  # not DROPPED
                    X[position[rid]] = np.frombuffer(blob, dtype="<f4")
                    found += 1
        if found != len(ids):  # pruned (or its embedding dropped) between the two reads
            raise RuntimeError(f"{len(ids) - found} of the window's rows went while it was read; read it again")
        return X


def scores_of(session: Session, where: Sequence) -> list[ScoreRow]:
    """Every current score of the requests of ``where`` (conditions on :class:`Decision`)."""
    answered = func.coalesce(Outcome.answered_model, Decision.chosen_model)
    q = (
        select(Feedback.request_id, Feedback.source, Feedback.score, Feedback.cost_usd, Decision.team, answered, Decision.app)
        .select_from(Feedback)
        .join(Decision, Decision.request_id == Feedback.request_id)
        .outerjoin(Outcome, Outcome.request_id == Feedback.request_id)
        .where(*where)
    )
    return [ScoreRow(*r) for r in session.execute(q.execution_options(yield_per=READ_CHUNK))]


def outcome_reason():
    """:data:`OUTCOME_REASONS` as a SQL expression over ``Decision`` outer-joined with ``Outcome`` (NULL: none)."""
    return case(
        (Decision.mock.is_(True), "mock"),
        (Outcome.cost_usd.is_(None), "no_outcome"),
        (Outcome.status == "client_left", "client_left"),
        (Outcome.status != "success", "failed"),
        (and_(Outcome.answered_model.is_not(None), Outcome.answered_model != Decision.chosen_model), "answered_by_other"),
        else_=None,
    )


def as_text(column):
    """A JSON column read as its text (SQLite's and PostgreSQL's alike): one string a row, parsed where it is used."""
    return cast(column, Text).label(column.key)


def naive_utc(ts: datetime) -> datetime:
    """``ts`` as a naive UTC time (the store's and the parts' timestamps; a naive one is taken as UTC already)."""
    return ts.astimezone(timezone.utc).replace(tzinfo=None) if ts.tzinfo is not None else ts
