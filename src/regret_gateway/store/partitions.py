"""PostgreSQL day partitions: retention drops a day's decisions, outcomes and scores whole.

On PostgreSQL, migration 0012 makes ``decisions``, ``outcomes`` and ``feedback`` tables partitioned by range of
the request id. A gateway id begins with the millisecond it was made (:mod:`regret_gateway.request_ids`), so a
day's requests, their outcomes and their scores lie in one partition of each table (``decisions_d20261207``,
...), whatever time their rows were written. Ids of another form (earlier versions' ``rg-<uuid4>``, an import's
own ids) live in each table's ``_default`` partition, pruned row by row as on SQLite.

:func:`ensure_days` makes the partitions of the coming days (``db upgrade``, every gateway start and ``db
prune`` call it); a day without its partition writes into the default one, and that day's partition is then
never made (PostgreSQL refuses a partition whose rows sit in the default), so its rows are pruned row by row.
:func:`drop_days` drops the days before a cutoff: scores first, then outcomes, then decisions, each day in a
transaction of its own. The foreign keys join each partition to the same day's decisions (:func:`foreign_keys`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from sqlalchemy import Connection, Engine, text

from regret_gateway.request_ids import day_bounds
from regret_gateway.store.locks import advisory_lock

TABLES = ("decisions", "outcomes", "feedback")  # the parent first: the children's foreign keys point at it
DAYS_AHEAD = 7  # partitions made ahead of today; a week without `db prune` or a gateway start still lands in them
_DAY_SUFFIX = "d%Y%m%d"  # a day partition's name is its table's, "_", and this
_DAY = re.compile(rf"^(?:{'|'.join(TABLES)})_(d\d{{8}})$")


def day_partition(table: str, day: date) -> str:
    return f"{table}_{day:{_DAY_SUFFIX}}"


def default_partition(table: str) -> str:
    return f"{table}_default"


def foreign_keys(suffix: str) -> list[str]:
    """The foreign keys of one partition of ``outcomes`` and ``feedback`` (``suffix``: ``default`` or
    ``d20261207``) to the same partition of ``decisions``. Keys between partitions, not between the partitioned
    tables: a request's rows share its day, and a day then drops without PostgreSQL searching the other days
    for rows that point into it."""
    return [
        f"ALTER TABLE {t}_{suffix} ADD CONSTRAINT {t}_{suffix}_request_id_fkey FOREIGN KEY (request_id) "
        f"REFERENCES decisions_{suffix} (request_id) ON DELETE CASCADE"
        for t in TABLES[1:]
    ]


def is_partition(name: str) -> bool:
    """Whether a table name is one of the store's partitions (not a table of its own)."""
    return name in {default_partition(t) for t in TABLES} or _DAY.match(name) is not None


def autogenerate_filter(by_day: bool) -> Callable[..., bool]:
    """Alembic's ``include_object`` for a store (``by_day``: :func:`partitioned`): compare the ORM's tables, not
    their partitions; on a partitioned store the ORM's foreign keys of ``outcomes`` and ``feedback`` are the
    partitions' own (:func:`foreign_keys`), so they are not compared."""

    def include(obj, name: str | None, type_: str, reflected: bool, compare_to) -> bool:
        if type_ == "table":
            return name is None or not is_partition(name)
        return not (by_day and type_ == "foreign_key_constraint" and obj.table.name in TABLES)

    return include


def partitioned(conn: Connection) -> bool:
    """Whether this store's tables are partitioned by day (PostgreSQL from migration 0012 on)."""
    if conn.dialect.name != "postgresql":
        return False
    kind = conn.execute(text("SELECT relkind FROM pg_class WHERE oid = to_regclass('decisions')")).scalar()
    return kind == "p"


def days(conn: Connection) -> list[date]:
    """The days that have their partitions, oldest first."""
    names = conn.execute(
        text("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass('decisions')")
    ).scalars()  # fmt: skip
    found = [_DAY.match(n) for n in names]
    return sorted(datetime.strptime(m[1], _DAY_SUFFIX).date() for m in found if m)


def _in_default(conn: Connection, day: date) -> bool:
    lo, hi = day_bounds(day)
    return any(
        conn.execute(
            text(f"SELECT 1 FROM {default_partition(t)} WHERE request_id >= :lo AND request_id < :hi LIMIT 1"), {"lo": lo, "hi": hi}
        ).first()
        for t in TABLES
    )  # fmt: skip


@dataclass(frozen=True)
class Made:
    """What :func:`ensure_days` did: the days it made, and those it could not (their rows are in the default)."""

    made: list[date]
    blocked: list[date]


def ensure_days(engine: Engine, today: date, ahead: int = DAYS_AHEAD) -> Made:
    """Make the partitions of ``today`` and the ``ahead`` days after it that are missing, under an advisory lock
    (gateways starting together make each once). Nothing on a store that is not partitioned."""
    made, blocked = [], []
    with advisory_lock(engine, "partitions"), engine.begin() as conn:
        if not partitioned(conn):
            return Made([], [])
        have = set(days(conn))
        for day in (today + timedelta(days=i) for i in range(ahead + 1)):
            if day in have:
                continue
            if _in_default(conn, day):
                blocked.append(day)
                continue
            lo, hi = day_bounds(day)
            for t in TABLES:
                conn.execute(text(f"CREATE TABLE {day_partition(t, day)} PARTITION OF {t} FOR VALUES FROM ('{lo}') TO ('{hi}')"))
            for sql in foreign_keys(f"{day:{_DAY_SUFFIX}}"):
                conn.execute(text(sql))
            made.append(day)
    return Made(made, blocked)


@dataclass(frozen=True)
class DayRows:
    """A day partition's rows in each table."""

    day: date
    decisions: int
    outcomes: int
    feedback: int


def _rows(conn: Connection, day: date) -> DayRows:
    counts = [int(conn.execute(text(f"SELECT count(*) FROM {day_partition(t, day)}")).scalar() or 0) for t in TABLES]
    return DayRows(day, *counts)


def old_days(conn: Connection, before: date) -> list[DayRows]:
    """The partitioned days before ``before`` and their rows, oldest first."""
    return [_rows(conn, day) for day in days(conn) if day < before]


def drop_days(engine: Engine, todo: list[DayRows], on_day: Callable[[DayRows], None] | None = None) -> None:
    """Drop the day partitions of ``todo`` (:func:`old_days`) with their rows, a day per transaction;
    ``on_day(rows)`` after each."""
    for rows in todo:
        with engine.begin() as conn:
            for t in reversed(TABLES):  # the scores and outcomes first: their keys point at the day's decisions
                conn.execute(text(f"DROP TABLE {day_partition(t, rows.day)}"))
        if on_day is not None:
            on_day(rows)
