"""The SQL schema (SQLAlchemy 2.0 typed ORM): routing decisions, their outcomes, feedback, router versions,
and where each budgeted team's routing is steered (``budget_steering``).

One row per request in ``decisions`` and ``outcomes``, keyed by the request id (the gateway's own id of
the request, returned to the client as ``x-regret-request-id``), and one per request and source in
``feedback`` (a user's score and the LLM judge's are kept apart): writing the same request twice is a
no-op (decisions, outcomes) or an update of that source's one current score (feedback), never a second
row. The Alembic migrations in
``migrations/`` create exactly this schema (a test compares them).
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    false,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# How a decision was made: the router's policy, epsilon exploration, the fail-open fallback, the
# uniform/default choice before any router was trained, or a historical log imported without propensity.
DECISION_MODES = ("policy", "exploration", "fallback", "cold_start", "imported")
# What the client got: an answer, an error, or the start of a stream it closed before the end (its cost is
# kept; it is not a quality observation).
OUTCOME_STATUSES = ("success", "failure", "client_left")
# A turn of a conversation (gateway/sessions.py): its first routed turn, a later turn kept on that turn's model
# (propensity 1: not training data), or a later turn routed afresh because a switch was worth its lost cache.
SESSION_TURNS = ("first", "kept", "rerouted")
# A decision's embedding once `db prune` has dropped it (store.retention.drop_embeddings): no score came within
# the score window, so it can no longer train. Empty rather than NULL: the column stays NOT NULL, and SQLite
# needs no table rebuild (which would cascade to the scores) to get there.
DROPPED = b""
EMBEDDED = "length(embedding) > 0"  # the partial index's condition, as migration 0011 writes it


def embedded():
    """SQL: the decision still holds its embedding (the partial index ``ix_decisions_embedded``'s condition)."""
    return func.length(Decision.embedding) > 0


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class RouterVersion(Base):
    __tablename__ = "router_versions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    artifact_path: Mapped[str] = mapped_column(Text)
    metrics: Mapped[dict] = mapped_column(JSON, default=dict)


class Decision(Base):
    __tablename__ = "decisions"
    __table_args__ = (
        CheckConstraint("propensity > 0 AND propensity <= 1", name="ck_decisions_propensity"),
        CheckConstraint("lam >= 0", name="ck_decisions_lam"),
        CheckConstraint(f"mode IN ({', '.join(repr(m) for m in DECISION_MODES)})", name="ck_decisions_mode"),
        Index("ix_decisions_team_created", "team", "created_at"),
        # a window's decisions counted from this narrow index, not the rows with their embeddings (0009)
        Index("ix_decisions_window", "created_at", "team", "tier", "chosen_model", "mock", "request_id"),
        # the decisions that still hold an embedding, by time: what `db prune` walks to drop the unscored ones (0011)
        Index(
            "ix_decisions_embedded",
            "created_at",
            "request_id",
            sqlite_where=text(EMBEDDED),
            postgresql_where=text(EMBEDDED),
        ),  # fmt: skip
    )

    request_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    team: Mapped[str | None] = mapped_column(String(128))
    tier: Mapped[str] = mapped_column(String(64))
    lam: Mapped[float] = mapped_column(Float)
    router_version: Mapped[str | None] = mapped_column(String(64))
    embedding_model: Mapped[str] = mapped_column(String(256))
    embedding_dim: Mapped[int] = mapped_column(Integer)
    # float32 little-endian, embedding_dim values; DROPPED (empty): unscored past the score window (store.retention)
    embedding: Mapped[bytes] = mapped_column(LargeBinary)
    chosen_model: Mapped[str] = mapped_column(String(256))
    propensity: Mapped[float | None] = mapped_column(Float)  # exact p(chosen_model | x); None only for imported logs
    mode: Mapped[str] = mapped_column(String(16))
    prompt_hash: Mapped[str] = mapped_column(String(64))  # sha256 hex of the routed text
    prompt_text: Mapped[str | None] = mapped_column(Text)  # only when the deployment opts in
    scores: Mapped[dict | None] = mapped_column(JSON)  # the router's per-model scores (audit)
    # answered by `serve --mock-upstream`'s mock, not the model: never training data, never budget spend
    mock: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    session_turn: Mapped[str | None] = mapped_column(String(8))  # SESSION_TURNS; None: not a turn of a conversation
    app: Mapped[str | None] = mapped_column(String(16))  # the app (keyed hash of the system prompt); None: none
    greedy_model: Mapped[str | None] = mapped_column(String(256))  # the router's choice before exploration (None: no router)
    # every model's probability under the distribution drawn from (non-zero entries); None: not logged (the
    # uniform cold start, one model, imported or older logs): retrain's off-policy weights read it (causal/ope.py)
    propensities: Mapped[dict | None] = mapped_column(JSON)


class Outcome(Base):
    __tablename__ = "outcomes"
    __table_args__ = (
        CheckConstraint("cost_usd >= 0", name="ck_outcomes_cost"),
        CheckConstraint(f"status IN ({', '.join(repr(s) for s in OUTCOME_STATUSES)})", name="ck_outcomes_status"),
    )

    request_id: Mapped[str] = mapped_column(ForeignKey("decisions.request_id", ondelete="CASCADE"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    cost_usd: Mapped[float] = mapped_column(Float)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    retries: Mapped[int | None] = mapped_column(Integer)  # failed upstream attempts before the one the client got
    # the model group whose answer the client got (LiteLLM's; another than the decision's chosen_model where a
    # LiteLLM fallback answered); None where none answered or it is not known
    answered_model: Mapped[str | None] = mapped_column(String(256))


class Feedback(Base):
    __tablename__ = "feedback"
    __table_args__ = (
        CheckConstraint("score >= 0 AND score <= 1", name="ck_feedback_score"),
        CheckConstraint("cost_usd IS NULL OR cost_usd >= 0", name="ck_feedback_cost"),
        Index("ix_feedback_updated", "updated_at"),  # a day's scores, as `db export` writes them (0011)
    )

    request_id: Mapped[str] = mapped_column(ForeignKey("decisions.request_id", ondelete="CASCADE"), primary_key=True)
    source: Mapped[str] = mapped_column(String(32), primary_key=True)  # user, judge, import, ...
    score: Mapped[float] = mapped_column(Float)
    cost_usd: Mapped[float | None] = mapped_column(Float)  # what producing the score cost (the judge's call)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revision: Mapped[int] = mapped_column(Integer, default=1)  # 1 + number of re-scorings


class BudgetSteering(Base):
    """One row per budgeted team: its ladder position (:mod:`regret_gateway.budgets`) and when it was last
    stepped. Every replica sharing the store reads it, and one step per interval is taken for all of them."""

    __tablename__ = "budget_steering"

    team: Mapped[str] = mapped_column(String(128), primary_key=True)  # the team's key, as in decisions.team
    period_start: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    position: Mapped[float] = mapped_column(Float)
    period_mean: Mapped[float] = mapped_column(Float)  # the position averaged over the period's requests so far
    lam: Mapped[float] = mapped_column(Float)  # the lambda the position stands for (ladder.Ladder.lam)
    state: Mapped[str] = mapped_column(String(16))  # started | stepped | waiting | spent
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
