"""The gateway's request ids, and the day an id was made in.

An id is ``rg-t`` + the millisecond it was made (12 hex digits, UTC) + 80 random bits (20 hex digits), so ids
sort by the time they were made and a day's ids lie between two strings. A PostgreSQL store partitions its
tables by day on these bounds (:mod:`regret_gateway.store.partitions`), and retention drops a day whole. The
``t`` sets them apart from ids of another form (``rg-<uuid4 hex>`` of earlier versions, an import's own ids):
those sort before every day and live in the default partition.
"""

from __future__ import annotations

import secrets
from datetime import date, datetime, time, timedelta, timezone

PREFIX = "rg-t"
_MS_DIGITS = 12  # 48 bits of milliseconds: until the year 10889


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def new_request_id(now: datetime | None = None) -> str:
    """A fresh id made at ``now`` (default: the current time)."""
    return f"{PREFIX}{_ms(now or datetime.now(timezone.utc)):0{_MS_DIGITS}x}{secrets.token_hex(10)}"


def day_bounds(day: date) -> tuple[str, str]:
    """The ids made on ``day`` (UTC) are those from the first bound up to (not including) the second."""
    lo, hi = (datetime.combine(d, time(), tzinfo=timezone.utc) for d in (day, day + timedelta(days=1)))
    return f"{PREFIX}{_ms(lo):0{_MS_DIGITS}x}", f"{PREFIX}{_ms(hi):0{_MS_DIGITS}x}"


def made_at(request_id: str) -> datetime | None:
    """When a gateway id was made (to the millisecond); None for an id of another form."""
    digits = request_id[len(PREFIX) : len(PREFIX) + _MS_DIGITS]
    if not request_id.startswith(PREFIX) or len(digits) != _MS_DIGITS:
        return None
    try:
        return datetime.fromtimestamp(int(digits, 16) / 1000, tz=timezone.utc)
    except ValueError:
        return None
