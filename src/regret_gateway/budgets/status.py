"""Where one team's budget stands in its current period: what ``status`` prints and the budget route
``GET /regret/budget`` answers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from regret_gateway.budgets.controller import expected_requests
from regret_gateway.budgets.ladder import Ladder, tier_ladder
from regret_gateway.budgets.periods import RATE_WINDOW, period_bounds
from regret_gateway.config import BudgetSpec, Settings
from regret_gateway.prices import usd
from regret_gateway.store.queries import team_spend
from regret_gateway.store.records import team_key
from regret_gateway.store.steering import read_steering


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
    lam: float  # the lambda the team's requests are routed at now (``route`` says how)
    route: str = ""  # where the ladder position sends the team's requests (:meth:`regret_gateway.budgets.ladder.Ladder.describe`)
    state: str | None = None  # the controller's last step (budgets/controller.py): None before the first
    ladder_end: str | None = None  # "dearest" or "cheapest" where the position is at an end of the ladder
    recent_requests: int = 0  # the team's requests with an outcome in the rate window (``recent_usd``'s)
    # the requests the controller expects before ``end`` (:func:`~regret_gateway.budgets.periods.requests_left`)
    expected_requests: float | None = None

    @property
    def rate_window_s(self) -> float:
        return min((self.now - self.start).total_seconds(), RATE_WINDOW.total_seconds())

    @property
    def projected_usd(self) -> float:
        """The spend at the period's end: the requests the controller expects for the rest of the period
        (``expected_requests``: the same span of the previous period, ...) at what the rate window's requests
        cost each; without that forecast, or with no request in the window, the window's spend rate in time
        carried on to the end."""
        if self.expected_requests is not None and self.recent_requests > 0:
            return self.spent_usd + self.expected_requests * self.recent_usd / self.recent_requests
        window = self.rate_window_s
        left = max(0.0, (self.end - self.now).total_seconds())
        return self.spent_usd + (self.recent_usd / window * left if window > 0 else 0.0)

    @property
    def elapsed_share(self) -> float:
        return (self.now - self.start).total_seconds() / (self.end - self.start).total_seconds()

    @property
    def unmeetable(self) -> str | None:
        """Why the budget cannot be met, or None: spent already; routed to the cheapest model; or routed
        at the ladder's dearest rung (a tier, or what is left after dominated tiers) and still projected under
        the budget."""
        if self.spent_usd >= self.budget.usd:
            return "spent: every request goes to the cheapest model until the period ends"
        if self.ladder_end == "cheapest":
            return "the cheapest model alone spends more than the budget leaves"
        if self.ladder_end == "dearest" and self.projected_usd < 0.95 * self.budget.usd:
            return "the ladder's dearest rung spends less than the budget: the rest is left unspent"
        return None

    def to_dict(self) -> dict:
        """What the audit route ``GET /regret/budget`` answers."""
        return {
            "team": self.team, "budget_usd": self.budget.usd, "per": self.budget.per,
            "period_start": self.start.isoformat(), "period_end": self.end.isoformat(),
            "spent_usd": self.spent_usd, "requests": self.requests, "projected_usd": self.projected_usd,
            "lam": self.lam, "route": self.route, "steering": self.state, "unmeetable": self.unmeetable,
        }  # fmt: skip

    def line(self) -> str:
        """One status line: budget, spend so far, the projection, the lambda and the route in effect."""
        b = self.budget
        over = " -- OVER BUDGET" if self.spent_usd > b.usd else (" -- projected over" if self.projected_usd > b.usd else "")
        why = f" -- cannot be met: {self.unmeetable}" if self.unmeetable else ""
        return (
            f"team {self.team}: budget {usd(b.usd)} per {b.per} (since {self.start:%Y-%m-%d %H:%M} UTC, "
            f"{100 * self.elapsed_share:.0f}% of the period gone): spent {usd(self.spent_usd)} "
            f"({100 * self.spent_usd / b.usd:.1f}%) on {self.requests} requests, projected {usd(self.projected_usd)} "
            f"at the period's end{over}; λ now {self.lam:g}: {self.route or 'its tier'}"
            f"{'' if self.state else ' (not steered yet)'}{why}"
        )


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
    expected = expected_requests(session, team, now, start, end, requests)
    ladder = ladder or tier_ladder(settings)
    steering = read_steering(session, team)
    if steering is None or steering.period_start != start:
        return BudgetStatus(team, budget, start, end, now, spent, recent, requests, settings.tiers[spec.tier].lam,
                            f"tier {spec.tier}", recent_requests=recent_n, expected_requests=expected)  # fmt: skip
    ladder_end = "dearest" if steering.position <= 0 else "cheapest" if steering.position >= ladder.top else None
    return BudgetStatus(team, budget, start, end, now, spent, recent, requests, steering.lam,
                        ladder.describe(steering.position), steering.state, ladder_end, recent_n, expected)  # fmt: skip
