"""Budget periods are UTC calendar periods; bad budgets are refused at start in one line."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from regret_gateway.budgets.periods import period_bounds
from regret_gateway.budgets.status import BudgetStatus
from regret_gateway.config import BudgetSpec, ConfigError, Settings, load_settings


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def test_periods_are_utc_days_weeks_from_monday_and_calendar_months():
    now = utc(2026, 12, 31, 23, 59)  # a Thursday
    assert period_bounds("day", now) == (utc(2026, 12, 31), utc(2027, 1, 1))
    assert period_bounds("week", now) == (utc(2026, 12, 28), utc(2027, 1, 4))
    assert period_bounds("month", now) == (utc(2026, 12, 1), utc(2027, 1, 1))
    assert period_bounds("month", utc(2027, 2, 10)) == (utc(2027, 2, 1), utc(2027, 3, 1))
    # a time given in another zone is the same instant: 01:00 at +02:00 is 23:00 UTC the day before
    plus_two = timezone(timedelta(hours=2))
    assert period_bounds("day", datetime(2026, 11, 27, 1, 0, tzinfo=plus_two)) == (utc(2026, 11, 26), utc(2026, 11, 27))


def test_the_projection_uses_the_last_days_rate_not_the_periods_average():
    budget = BudgetSpec(usd=100.0, per="month")
    start, end = period_bounds("month", utc(2026, 11, 20))
    # $60 spent so far, $1 of it in the last day: 11 days of November left at $1 a day
    status = BudgetStatus("t", budget, start, end, utc(2026, 11, 20), 60.0, 1.0, 600, 500.0)
    assert status.projected_usd == pytest.approx(71.0)
    assert "projected over" not in status.line() and "λ now 500" in status.line()
    assert "OVER BUDGET" in BudgetStatus("t", budget, start, end, utc(2026, 11, 20), 120.0, 1.0, 9, 1.0).line()


@pytest.mark.parametrize(
    "budget, message",
    [
        ("{usd: -5, per: month}", "teams.support.budget.usd: Input should be greater than 0"),
        ("{usd: 0, per: day}", "teams.support.budget.usd: Input should be greater than 0"),
        ("{usd: .inf, per: day}", "teams.support.budget.usd"),
        ("{usd: 50, per: fortnight}", "teams.support.budget.per: Input should be 'day', 'week' or 'month'"),
        ("{usd: 50, every: day}", "teams.support.budget.every: Extra inputs are not permitted"),
    ],
)
def test_a_bad_budget_is_refused_in_one_line_naming_the_key(tmp_path, budget, message):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        "regret_gateway:\n  models: [a, b]\n  default_tier: economy\n  tiers: {economy: {lam: 100}}\n"
        f"  teams:\n    support: {{tier: economy, budget: {budget}}}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_settings(cfg)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_only_a_team_with_a_budget_is_steered():
    from regret_gateway.gateway.steering import Steerer

    settings = Settings(models=("a", "b"), default_tier="t", tiers={"t": {"lam": 1.0}},
                        teams={"support": {"tier": "t", "budget": {"usd": 500, "per": "week", "interval_s": 120}},
                               "research": {"tier": "t"}})  # fmt: skip
    steerer = Steerer(settings, engine_of=lambda: None)
    assert steerer.teams == ["support"] and steerer.active and steerer.interval_s == 120.0
    assert steerer.position("research", "t") is None  # an unbudgeted team routes at its own tier
    assert not Steerer(Settings(models=("a", "b"), default_tier="t", tiers={"t": {"lam": 1.0}}), engine_of=lambda: None).active


def test_a_controller_step_moves_toward_the_affordable_cost_and_is_bounded():
    from regret_gateway.budgets.controller import MAX_STEP, next_position

    kw = dict(budget_usd=10.0, expected_requests=1000.0, top=3.0)
    # $9 of 10 spent, 1,000 requests to come: 0.1 cents each is affordable; the last 100 cost 1 cent each
    up, why = next_position(1.0, spent_usd=9.0, window_usd=1.0, window_requests=100, **kw)
    assert why == "stepped" and up == pytest.approx(1.0 + MAX_STEP)  # ln(10) * GAIN > MAX_STEP: bounded
    down, _ = next_position(1.0, spent_usd=1.0, window_usd=0.0099, window_requests=100, **kw)  # 0.0099 c vs 0.9 c
    assert down == pytest.approx(1.0 - MAX_STEP)
    near, _ = next_position(1.0, spent_usd=9.0, window_usd=0.11, window_requests=100, **kw)  # 10% over: a small step up
    assert 1.0 < near < 1.1
    assert next_position(1.0, spent_usd=9.0, window_usd=1.0, window_requests=5, **kw) == (1.0, "waiting")
    assert next_position(0.2, spent_usd=10.0, window_usd=1.0, window_requests=100, **kw) == (3.0, "spent")
    assert next_position(0.2, spent_usd=0.0, window_usd=0.0, window_requests=100, **kw)[0] == 0.0  # at most the top tier


RUNG_COST = np.array([0.010, 0.004, 0.0015, 0.0004])  # per request: three tiers, then the cheapest model
MINUTES = np.arange(1440)
DIURNAL = 20 * (1 + 0.6 * np.sin(2 * np.pi * (MINUTES - 600) / 1440))  # requests a minute, peak mid-afternoon
DAY0 = datetime(2026, 11, 27, tzinfo=timezone.utc)


def steer_a_day(today: np.ndarray, budget: float, position: float, expected, rng: np.random.Generator):
    """One controller step a minute over ``today``'s requests a minute, each request's rung drawn as the
    gateway does and its cost around the rung's; ``expected(minute, so_far)``: the requests to come.
    Returns (the day's spend, the position at each minute)."""
    from regret_gateway.budgets.controller import next_position

    spent, window_usd, window_n, so_far, path = 0.0, 0.0, 0, 0, []
    for m in MINUTES:
        position, why = next_position(position, budget_usd=budget, spent_usd=spent, expected_requests=expected(m, so_far),
                                      window_usd=window_usd, window_requests=window_n, top=3.0)  # fmt: skip
        if why != "waiting":
            window_usd, window_n = 0.0, 0
        j = min(int(position), 2)
        rungs = np.where(rng.random(today[m]) < position - j, j + 1, j)
        cost = float((RUNG_COST[rungs] * rng.lognormal(0.0, 0.5, today[m]) / np.exp(0.125)).sum())
        spent, window_usd, window_n, so_far = spent + cost, window_usd + cost, window_n + today[m], so_far + today[m]
        path.append(position)
    return spent, np.array(path)


def test_steering_lands_a_diurnal_day_with_a_surge_on_its_budget():
    """A day of traffic whose rate follows the clock (4x from night to afternoon) with a one-hour surge at
    3x: one controller step a minute from the team's recent cost and yesterday's traffic lands the day's
    spend within 5% of the budget, from a start at the dearest tier that would spend 2.6 times as much."""
    from regret_gateway.budgets.periods import requests_left

    rng = np.random.default_rng(0)
    yesterday = rng.poisson(DIURNAL)
    today = rng.poisson(DIURNAL * np.where((MINUTES >= 840) & (MINUTES < 900), 3.0, 1.0))
    budget = 0.0038 * today.sum()  # a mix of the second and third rungs

    def expected(m, so_far):
        now = DAY0 + timedelta(minutes=int(m))
        return requests_left(now, DAY0, DAY0 + timedelta(days=1), so_far, int(yesterday[m:].sum()))

    spent, path = steer_a_day(today, budget, 0.0, expected, rng)
    assert abs(spent / budget - 1) < 0.05, spent / budget
    assert path[0] == 0.0 and max(path) > 1.0  # it had to move: the dearest tier spends 2.6x the budget


def test_a_new_teams_first_day_is_expected_to_follow_the_platforms_day_before():
    """A team with no day before of its own: from the rate so far, at night (a third of the afternoon's) it
    expects too few requests, spends as if the day were quiet and must swing to the cheap end in the
    afternoon; expecting its day to go on as the platform's went on yesterday (a flatter curve peaking an
    hour earlier), it stays nearer the one position that spends the budget."""
    from regret_gateway.budgets.periods import MIN_REQUESTS, requests_left

    rng = np.random.default_rng(1)
    today = rng.poisson(DIURNAL)
    platform = rng.poisson(100 * (1 + 0.4 * np.sin(2 * np.pi * (MINUTES - 540) / 1440)))
    budget = (0.5 * RUNG_COST[1] + 0.5 * RUNG_COST[2]) * today.sum()  # halfway between standard and economy

    def expected(use_platform: bool):
        def left(m, so_far):
            now = DAY0 + timedelta(minutes=int(m))
            shape = (int(platform[:m].sum()), int(platform[m:].sum())) if use_platform else None
            return requests_left(now, DAY0, DAY0 + timedelta(days=1), so_far, None, shape)

        return left

    now = DAY0 + timedelta(hours=1)
    end = DAY0 + timedelta(days=1)
    assert requests_left(now, DAY0, end, 30, None, (100, 1000)) == 300.0  # 30 so far, the platform had 10x to come
    assert requests_left(now, DAY0, end, 30, None, (MIN_REQUESTS - 1, 1000)) == 690.0  # too few to tell: the rate
    assert requests_left(now, DAY0, end, 30, 400, (100, 1000)) == 400.0  # the team's own day before comes first
    runs = {use: steer_a_day(today, budget, 1.5, expected(use), np.random.default_rng(2)) for use in (False, True)}
    for spent, _ in runs.values():
        assert abs(spent / budget - 1) < 0.05
    swing = {use: float(np.abs(path[60:] - 1.5).mean()) for use, (_, path) in runs.items()}  # from the fixed position
    assert swing[True] < 0.6 * swing[False], swing  # 0.27 and 0.63 (the shapes differ: not 0)
