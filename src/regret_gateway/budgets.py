"""Team budgets: the UTC period a budget covers, and where a team's spend stands in it.

A budget (``teams.<team>.budget`` in the config: ``usd`` per ``day`` | ``week`` | ``month``) covers UTC
calendar periods: a day from 00:00, a week from Monday 00:00, a month from its first day. A team's spend
is what its requests' outcomes cost (the store's ``outcomes.cost_usd``, so every replica sharing the store
sees the same spend); the LLM judge's calls are the platform's, not the team's, and are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from regret_gateway.config import BudgetSpec

RATE_WINDOW = timedelta(days=1)  # the projection extrapolates the spend rate of the last day (or the period so far)


def period_bounds(per: str, now: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the UTC ``per`` period (day, week from Monday, calendar month) holding ``now``."""
    now = now.astimezone(timezone.utc)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if per == "day":
        return day, day + timedelta(days=1)
    if per == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if per == "month":
        start = day.replace(day=1)
        return start, (start + timedelta(days=32)).replace(day=1)
    raise ValueError(f"unknown budget period {per!r}: day, week or month")


@dataclass(frozen=True)
class BudgetStatus:
    """Where one team's spend stands in its budget's current period, at ``now``."""

    team: str
    budget: BudgetSpec
    start: datetime
    end: datetime
    now: datetime
    spent_usd: float  # since ``start``
    recent_usd: float  # in the rate window: the last RATE_WINDOW, or the period so far if shorter
    requests: int  # the team's requests with an outcome since ``start``
    lam: float  # the lambda the team's requests are routed at (its tier's: budgets are not steered)

    @property
    def rate_window_s(self) -> float:
        return min((self.now - self.start).total_seconds(), RATE_WINDOW.total_seconds())

    @property
    def projected_usd(self) -> float:
        """The spend at the period's end if the rate of the last day (or of the period so far) goes on."""
        window = self.rate_window_s
        left = max(0.0, (self.end - self.now).total_seconds())
        return self.spent_usd + (self.recent_usd / window * left if window > 0 else 0.0)

    @property
    def elapsed_share(self) -> float:
        return (self.now - self.start).total_seconds() / (self.end - self.start).total_seconds()

    def to_dict(self) -> dict:
        """What the audit route ``GET /regret/budget`` answers."""
        return {
            "team": self.team, "budget_usd": self.budget.usd, "per": self.budget.per,
            "period_start": self.start.isoformat(), "period_end": self.end.isoformat(),
            "spent_usd": self.spent_usd, "requests": self.requests, "projected_usd": self.projected_usd,
            "lam": self.lam, "steered": False,
        }  # fmt: skip

    def line(self) -> str:
        """One status line: budget, spend so far, the projection and the lambda the team's requests use."""
        b = self.budget
        over = " -- OVER BUDGET" if self.spent_usd > b.usd else (" -- projected over" if self.projected_usd > b.usd else "")
        return (
            f"team {self.team}: budget ${b.usd:,.2f} per {b.per} (since {self.start:%Y-%m-%d %H:%M} UTC, "
            f"{100 * self.elapsed_share:.0f}% of the period gone): spent ${self.spent_usd:,.4f} "
            f"({100 * self.spent_usd / b.usd:.1f}%) on {self.requests} requests, projected ${self.projected_usd:,.4f} "
            f"at the period's end{over}; λ {self.lam:g} (the tier's: budgets are tracked, not steered)"
        )
