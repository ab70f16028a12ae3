"""Budget periods are UTC calendar periods; bad budgets are refused at start in one line."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from regret_gateway.budgets import BudgetStatus, period_bounds
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
    assert "projected over" not in status.line() and "λ 500" in status.line()
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


def test_a_budget_is_part_of_the_team():
    settings = Settings(models=("a", "b"), default_tier="t", tiers={"t": {"lam": 1.0}},
                        teams={"support": {"tier": "t", "budget": {"usd": 500}}})  # fmt: skip
    assert settings.teams["support"].budget == BudgetSpec(usd=500.0, per="month")
