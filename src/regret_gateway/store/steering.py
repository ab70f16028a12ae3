"""The SQL of budget steering (the decisions are :mod:`regret_gateway.budgets`): a team's steering row, read
and written so that one replica steps per interval (:func:`write_steering` updates the row only where nobody
else stepped since it was read); the team's and the platform's earlier requests the forecast reads; and each
model's recent cost per answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from sqlalchemy import Float, cast, func, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from regret_gateway.prices import CostLine, line_from_sums
from regret_gateway.store.queries import team_spend
from regret_gateway.store.records import team_key
from regret_gateway.store.schema import BudgetSteering, Decision, Outcome

COST_LOOKBACK = timedelta(days=7)  # the window the cheapest model is found in


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)  # SQLite gives naive datetimes back


@dataclass(frozen=True)
class Steering:
    """Where one team's routing is on its ladder (:mod:`regret_gateway.budgets`), as the store holds it.
    ``stamp``: the row's ``updated_at`` as the database gave it back, which a write compares with."""

    team: str
    period_start: datetime
    position: float
    lam: float
    state: str  # stepped | waiting | spent
    updated_at: datetime
    period_mean: float  # the position averaged over the period's requests so far: where the next period starts
    stamp: datetime | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, row: BudgetSteering) -> "Steering":
        return cls(row.team, _utc(row.period_start), row.position, row.lam, row.state, _utc(row.updated_at),
                   row.period_mean, row.updated_at)  # fmt: skip


def read_steering(session: Session, team: str) -> Steering | None:
    row = session.get(BudgetSteering, team_key(team))
    return None if row is None else Steering.of(row)


def write_steering(session: Session, team: str, read: Steering | None, values: dict) -> bool:
    """Store ``team``'s new step ``values`` (the columns of ``budget_steering``) and commit: a first row where
    ``read`` is None, else an update only where nobody stepped since ``read`` was read. False where another
    replica stepped (or inserted) first: its row holds, and the caller reads it back."""
    key = team_key(team)
    if read is None:
        session.add(BudgetSteering(team=key, **values))
    else:
        try:
            done = session.execute(
                update(BudgetSteering).where(BudgetSteering.team == key, BudgetSteering.updated_at == read.stamp).values(**values)
            )
        except OperationalError:  # SQLite (WAL): another connection wrote since this one read
            done = None
        if done is None or getattr(done, "rowcount", 1) == 0:
            session.rollback()
            return False
    try:
        session.commit()
    except IntegrityError:  # another replica inserted the team's first row
        session.rollback()
        return False
    return True


def requests_held(session: Session, team: str, since: datetime, until: datetime) -> int | None:
    """The team's requests in [since, until), or None where the store holds none of its traffic from before
    ``since`` (so that it cannot tell how many there were)."""
    key = team_key(team)
    assert key is not None
    first = session.scalar(select(func.min(Decision.created_at)).where(Decision.team == key, Decision.mock.is_(False)))
    if first is None or _utc(first) > since:
        return None
    return team_spend(session, key, since, until)[1]


def platform_shape(session: Session, now: datetime, start: datetime, end: datetime) -> tuple[int, int] | None:
    """Every team's requests in the previous period before and after ``now``'s place in it, or None where
    the store holds no traffic from before that period began (so that it cannot tell its shape)."""
    span = end - start
    first = session.scalar(select(func.min(Decision.created_at)).where(Decision.mock.is_(False)))
    if first is None or _utc(first) > start - span:
        return None
    before, after = (
        session.scalar(select(func.count()).select_from(Decision).where(Decision.created_at >= a, Decision.created_at < b,
                                                                         Decision.mock.is_(False)))
        for a, b in ((start - span, now - span), (now - span, start))
    )  # fmt: skip
    return int(before or 0), int(after or 0)


# The model whose answer (and price) an outcome is: a LiteLLM fallback's, where one answered for the chosen model.
answering = func.coalesce(Outcome.answered_model, Decision.chosen_model)


def model_costs(session: Session, models: list[str], now: datetime) -> dict[str, float]:
    """Each configured model's mean cost per answer over the last COST_LOOKBACK (any team; by the model that
    answered, never a mock's); a model without a recorded cost is left out."""
    rows = session.execute(
        select(answering, func.avg(Outcome.cost_usd))
        .select_from(Decision)
        .join(Outcome)
        .where(Decision.created_at >= now - COST_LOOKBACK, Outcome.status == "success", Decision.mock.is_(False))
        .group_by(answering)
    ).all()
    return {m: float(c) for m, c in rows if m in models and c is not None}


def cost_lines(session: Session, models: list[str], now: datetime) -> dict[str, CostLine]:
    """Each configured model's :class:`CostLine` over its successful answers of the last COST_LOOKBACK that
    carry a prompt-token count (LiteLLM's usage); a model with too few such answers, or with every prompt
    the same size, is left out."""
    x, y = cast(Outcome.prompt_tokens, Float), cast(Outcome.cost_usd, Float)
    rows = session.execute(
        select(answering, func.count(), func.sum(x), func.sum(y), func.sum(x * x), func.sum(x * y))
        .select_from(Decision)
        .join(Outcome)
        .where(
            Decision.created_at >= now - COST_LOOKBACK,
            Outcome.status == "success",
            Outcome.prompt_tokens.is_not(None),
            Decision.mock.is_(False),
        )  # fmt: skip
        .group_by(answering)
    ).all()
    lines = {m: line_from_sums(int(n), float(sx), float(sy), float(sxx), float(sxy)) for m, n, sx, sy, sxx, sxy in rows
             if m in models and n}  # fmt: skip
    return {m: line for m, line in lines.items() if line is not None}
