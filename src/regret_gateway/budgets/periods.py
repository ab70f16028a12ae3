"""A budget's period (UTC day, week from Monday, calendar month) and how many requests a team is expected
to send in the rest of it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

RATE_WINDOW = timedelta(days=1)  # the projection prices the requests left at this window's cost per request
MIN_REQUESTS = 20  # a step waits until the team's requests since the last step number this many; a new team's
# forecast follows the platform's traffic from this many requests of it before its place in the period


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
