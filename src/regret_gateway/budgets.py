"""Team budgets: the UTC period a budget covers, where a team's spend stands in it, and how the team's
routing is steered so that its spend lands on the budget.

A budget (``teams.<team>.budget`` in the config: ``usd`` per ``day`` | ``week`` | ``month``) covers UTC
calendar periods: a day from 00:00, a week from Monday 00:00, a month from its first day. A team's spend
is what its requests' outcomes cost (the store's ``outcomes.cost_usd``, so every replica sharing the store
sees the same spend); the LLM judge's calls are the platform's, not the team's, and are not counted.

Steering. A budgeted team is routed on a **ladder** (:mod:`regret_gateway.ladder`): rungs from the dearest
to the cheapest -- the frontier of cost and quality retrain publishes for the team, else the configured
tiers by lambda and then the cheapest model. Its **position** u in [0, top] says where: at u = j + s the
request goes to rung j with probability 1 - s and to rung j + 1 with probability s, so spend moves
smoothly with u, and the logged propensity (the mixture's) stays exact. Every ``interval_s`` the controller (:func:`next_position`) compares what the
team's recent requests cost each with what it may spend per request for the rest of the period (the money
left over the requests it expects: the same span of the previous period; for a team new this period, its
requests so far scaled by how the platform's traffic went on in the previous period; else the period's
rate so far) and moves u by GAIN rungs per e-fold of that ratio, at most MAX_STEP rungs a step: an integral controller on
the log cost (dual ascent on the price of a dollar). A spent budget sends the team to the cheapest model;
a new period starts at the previous period's mean position over its requests (the fixed position that
would have spent about as much); the first where the ladder's forecast spends the budget, else at the
team's tier's lambda.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from regret_gateway.config import BudgetSpec

RATE_WINDOW = timedelta(days=1)  # the projection prices the requests left at this window's cost per request
GAIN = 0.5  # rungs the position moves per e-fold between the recent cost per request and the affordable one
MAX_STEP = 0.5  # the most rungs one step moves
MIN_REQUESTS = 20  # a step waits until the team's requests since the last step number this many


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
    lam: float  # the lambda the team's requests are routed at now (``route`` says how)
    route: str = ""  # where the ladder position sends the team's requests (:meth:`regret_gateway.ladder.Ladder.describe`)
    state: str | None = None  # the controller's last step (store/steering.py): None before the first
    ladder_end: str | None = None  # "dearest" or "cheapest" where the position is at an end of the ladder
    recent_requests: int = 0  # the team's requests with an outcome in the rate window (``recent_usd``'s)
    expected_requests: float | None = None  # the requests the controller expects before ``end`` (:func:`requests_left`)

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
            f"team {self.team}: budget ${b.usd:,.2f} per {b.per} (since {self.start:%Y-%m-%d %H:%M} UTC, "
            f"{100 * self.elapsed_share:.0f}% of the period gone): spent ${self.spent_usd:,.4f} "
            f"({100 * self.spent_usd / b.usd:.1f}%) on {self.requests} requests, projected ${self.projected_usd:,.4f} "
            f"at the period's end{over}; λ now {self.lam:g}: {self.route or 'its tier'}"
            f"{'' if self.state else ' (not steered yet)'}{why}"
        )


def requests_left(now: datetime, start: datetime, end: datetime, so_far: int, previous_span: int | None,
                  platform: tuple[int, int] | None = None) -> float:  # fmt: skip
    """How many more requests the team is expected to send before ``end``: as many as in the same span of
    the previous period (``previous_span``, None where the store holds no earlier period of the team's);
    else, for a team new this period, its requests so far scaled as the platform's traffic of the previous
    period grew from the same point (``platform``: every team's requests before and after ``now``'s place in
    the previous period, None where the store does not hold all of it; used from MIN_REQUESTS before): a new
    team's period is expected to follow the platform's (its night and its afternoon); else the period's
    rate so far times the time left."""
    if previous_span is not None:
        return float(previous_span)
    if platform is not None and platform[0] >= MIN_REQUESTS:
        return so_far * platform[1] / platform[0]
    elapsed = (now - start).total_seconds()
    return so_far / elapsed * (end - now).total_seconds() if elapsed > 0 else 0.0


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
