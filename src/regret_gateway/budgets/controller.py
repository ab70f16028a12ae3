"""The budget controller: one step of a team's ladder position (:func:`next_position`), taken once per
``interval_s`` for every replica that shares the store (:func:`step_team`: the step is written only where
nobody else stepped since it was read, :func:`regret_gateway.store.steering.write_steering`)."""

from __future__ import annotations

import math
from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from regret_gateway.budgets.ladder import Ladder, tier_ladder
from regret_gateway.budgets.periods import MIN_REQUESTS, period_bounds, requests_left
from regret_gateway.config import Settings
from regret_gateway.store.queries import team_spend
from regret_gateway.store.records import team_key
from regret_gateway.store.steering import Steering, platform_shape, read_steering, requests_held, write_steering

GAIN = 0.5  # rungs the position moves per e-fold between the recent cost per request and the affordable one
MAX_STEP = 0.5  # the most rungs one step moves


def next_position(
    position: float,
    *,
    budget_usd: float,
    spent_usd: float,
    expected_requests: float,
    window_usd: float,
    window_requests: int,
    top: float,
) -> tuple[float, str]:
    """One controller step: (the new ladder position, why). ``window_usd`` / ``window_requests``: what the
    team's requests since the last step cost. The position moves toward the cheap end (up) when they cost
    more per request than what is left allows over ``expected_requests`` (at least one), and down otherwise;
    at most MAX_STEP, within [0, top]. ``spent``: nothing is left, the cheapest model; ``waiting``: fewer
    than MIN_REQUESTS requests since the last step (the position stays)."""
    left = budget_usd - spent_usd
    if left <= 0:
        return top, "spent"
    if window_requests < MIN_REQUESTS:
        return position, "waiting"
    affordable = left / max(expected_requests, 1.0)
    recent = window_usd / window_requests
    # free requests (recent == 0): nothing says the team spends too much, so the full step toward quality
    step = -MAX_STEP if recent <= 0 else max(-MAX_STEP, min(MAX_STEP, GAIN * math.log(recent / affordable)))
    return max(0.0, min(top, position + step)), "stepped"


def expected_requests(session: Session, team: str, now: datetime, start: datetime, end: datetime, so_far: int) -> float:
    """The requests ``team`` is expected to send from ``now`` to ``end`` (:func:`~regret_gateway.budgets.periods.requests_left`
    on what the store holds of the same span of the previous period: the team's, else the platform's)."""
    span = end - start
    previous = requests_held(session, team, now - span, end - span)
    platform = platform_shape(session, now, start, end) if previous is None else None
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
    ``ladder``: the team's (default: :func:`~regret_gateway.budgets.ladder.tier_ladder`); where its rungs carry
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
        current = read_steering(session, team)
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
                forecast_start = ladder.start(budget.usd, requests_held(session, team, start - (end - start), start) or 0)
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
            expected_requests=expected_requests(session, team, now, start, end, so_far), top=top,
        )  # fmt: skip
        if current is not None and current.period_start == start and state == "waiting" and position == current.position:
            return current  # the window keeps growing until it holds enough requests
        lam = ladder.lam(position)
        values = {"period_start": start, "position": position, "lam": lam, "state": state, "updated_at": now,
                  "period_mean": mean}  # fmt: skip
        if not write_steering(session, team, current, values):  # another replica stepped first: its position holds
            return read_steering(session, team) or Steering(key, start, position, lam, state, now, mean)
    return Steering(key, start, position, lam, state, now, mean)
