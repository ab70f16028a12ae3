"""Budget steering in the store: one controller step for a team, taken once per interval for every
replica that shares the store (the ``budget_steering`` row is updated only where nobody else stepped since
it was read), and what the step reads -- the team's spend, its requests since the last step, the
requests the same span of the previous period held (for a team new this period: the platform's, before
and after the same point) -- and where a team's budget stands (``status``, the
budget route)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, Float, cast, func, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from regret_gateway.budgets import RATE_WINDOW, BudgetStatus, next_position, period_bounds, requests_left
from regret_gateway.config import Settings
from regret_gateway.ladder import Ladder, tier_ladder
from regret_gateway.prices import CostLine, line_from_sums
from regret_gateway.store.queries import team_spend
from regret_gateway.store.records import team_key
from regret_gateway.store.schema import BudgetSteering, Decision, Outcome

COST_LOOKBACK = timedelta(days=7)  # the window the cheapest model is found in


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)  # SQLite gives naive datetimes back


@dataclass(frozen=True)
class Steering:
    """Where one team's routing is on the ladder (:mod:`regret_gateway.budgets`), as the store holds it."""

    team: str
    period_start: datetime
    position: float
    lam: float
    state: str  # stepped | waiting | spent
    updated_at: datetime
    period_mean: float  # the position averaged over the period's requests so far: where the next period starts

    @classmethod
    def of(cls, row: BudgetSteering) -> "Steering":
        return cls(row.team, _utc(row.period_start), row.position, row.lam, row.state, _utc(row.updated_at), row.period_mean)


def read_steering(session: Session, team: str) -> Steering | None:
    row = session.get(BudgetSteering, team_key(team))
    return None if row is None else Steering.of(row)


def _requests_held(session: Session, key: str, since: datetime, until: datetime) -> int | None:
    """The team's requests in [since, until), or None where the store holds none of its traffic from before
    ``since`` (so that it cannot tell how many there were)."""
    first = session.scalar(select(func.min(Decision.created_at)).where(Decision.team == key, Decision.mock.is_(False)))
    if first is None or _utc(first) > since:
        return None
    return team_spend(session, key, since, until)[1]


def _platform_shape(session: Session, now: datetime, start: datetime, end: datetime) -> tuple[int, int] | None:
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


def _expected_requests(session: Session, key: str, now: datetime, start: datetime, end: datetime, so_far: int) -> float:
    span = end - start  # the same span of the previous period, where the store holds it
    previous = _requests_held(session, key, now - span, end - span)
    platform = _platform_shape(session, now, start, end) if previous is None else None
    return requests_left(now, start, end, so_far, previous, platform)


def _placed(ladder: Ladder, steering: Steering) -> float:
    """Where ``steering``'s position lies on ``ladder``: the position itself where the ladder gives it the
    lambda it was stepped at; else (a retrain has published another ladder since: a tier left out or back,
    another frontier) the first position of that lambda, so that the team keeps its price of a dollar, not
    its rung's number."""
    position = min(steering.position, float(ladder.top))
    same = math.isclose(ladder.lam(position), steering.lam, rel_tol=1e-9, abs_tol=1e-12)
    return position if same else ladder.at_lam(steering.lam)


def step_team(engine: Engine, settings: Settings, team: str, now: datetime, ladder: Ladder | None = None) -> Steering:
    """Take ``team``'s controller step at ``now`` if its last one is ``budget.interval_s`` old (or from an
    earlier period), else read where it stands; returns the position every replica now routes at.
    ``ladder``: the team's (default: :func:`~regret_gateway.ladder.tier_ladder`); where its rungs carry
    forecast costs (the published router's, for this team), a team's first period starts where they spend
    the budget over as many requests as the previous period held (where the store holds that period), else
    at its tier's lambda. A position stepped on another ladder than ``ladder`` moves to the same lambda on it
    (:func:`_placed`)."""
    spec = settings.teams[team]
    budget, key = spec.budget, team_key(team)
    assert budget is not None and key is not None, f"team {team!r} has no budget"
    ladder = ladder or tier_ladder(settings)
    top = float(ladder.top)
    start, end = period_bounds(budget.per, now)
    with Session(engine) as session:
        row = session.get(BudgetSteering, key)
        current = None if row is None else Steering.of(row)
        if (
            current is not None
            and current.period_start == start
            and (now - current.updated_at).total_seconds() < budget.interval_s
        ):
            return current  # stepped lately (by this replica or another)
        spent, so_far = team_spend(session, key, start, now)
        if current is None or current.period_start != start:  # a new period: at the last one's mean position
            position = ladder.at_lam(settings.tiers[spec.tier].lam) if current is None else min(current.period_mean, top)
            if current is None:  # the first: where the forecast spends the budget, if it can tell
                forecast_start = ladder.start(budget.usd, _requests_held(session, key, start - (end - start), start) or 0)
                position = position if forecast_start is None else forecast_start
            mean, since = position, start
        else:  # the requests since the last step were routed at its position
            position, since = _placed(ladder, current), current.updated_at
        window_usd, window_n = team_spend(session, key, max(since, start), now)
        if current is not None and current.period_start == start:
            earlier = max(so_far - window_n, 0)
            mean = (current.period_mean * earlier + position * window_n) / max(earlier + window_n, 1) if so_far else position
        position, state = next_position(
            position, budget_usd=budget.usd, spent_usd=spent, window_usd=window_usd, window_requests=window_n,
            expected_requests=_expected_requests(session, key, now, start, end, so_far), top=top,
        )  # fmt: skip
        if current is not None and current.period_start == start and state == "waiting" and position == current.position:
            return current  # the window keeps growing until it holds enough requests
        lam = ladder.lam(position)
        values = {"period_start": start, "position": position, "lam": lam, "state": state, "updated_at": now,
                  "period_mean": mean}  # fmt: skip
        if row is None:
            session.add(BudgetSteering(team=key, **values))
        else:  # only if nobody stepped since we read: one step per interval across replicas
            try:
                done = session.execute(
                    update(BudgetSteering)
                    .where(BudgetSteering.team == key, BudgetSteering.updated_at == row.updated_at)
                    .values(**values)
                )
            except OperationalError:  # SQLite (WAL): another connection wrote since this one read
                done = None
            if done is None or getattr(done, "rowcount", 1) == 0:  # another replica stepped: its position holds
                session.rollback()
                return read_steering(session, team) or Steering(key, start, position, lam, state, now, mean)
        try:
            session.commit()
        except IntegrityError:  # another replica inserted the team's first row: its position holds
            session.rollback()
            return read_steering(session, team) or Steering(key, start, position, lam, state, now, mean)
    return Steering(key, start, position, lam, state, now, mean)


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


def cheapest_model(costs: dict[str, float], models: list[str]) -> str | None:
    """The model of ``costs`` (:func:`model_costs`) that costs least (the first configured on a tie)."""
    return min(costs, key=lambda m: (costs[m], models.index(m))) if costs else None


def budget_status(session: Session, settings: Settings, team: str, now: datetime, ladder: Ladder | None = None) -> BudgetStatus:
    """Where ``team``'s budget (in ``settings``: it must have one) stands at ``now``: its spend, its
    projection (the requests the controller expects, at the rate window's cost per request), and the lambda and
    route its requests are steered to on ``ladder`` (default: the tiers'; its tier's until the first step of
    the period)."""
    spec = settings.teams[team]
    budget, key = spec.budget, team_key(team)
    assert budget is not None and key is not None, f"team {team!r} has no budget"
    start, end = period_bounds(budget.per, now)
    spent, requests = team_spend(session, key, start, now)
    recent, recent_n = team_spend(session, key, max(start, now - RATE_WINDOW), now)
    expected = _expected_requests(session, key, now, start, end, requests)
    ladder = ladder or tier_ladder(settings)
    steering = read_steering(session, team)
    if steering is None or steering.period_start != start:
        return BudgetStatus(team, budget, start, end, now, spent, recent, requests, settings.tiers[spec.tier].lam,
                            f"tier {spec.tier}", recent_requests=recent_n, expected_requests=expected)  # fmt: skip
    ladder_end = "dearest" if steering.position <= 0 else "cheapest" if steering.position >= ladder.top else None
    return BudgetStatus(team, budget, start, end, now, spent, recent, requests, steering.lam,
                        ladder.describe(steering.position), steering.state, ladder_end, recent_n, expected)  # fmt: skip
