"""How much the store holds, and pruning what is older than the retention period.

Decisions are the store's bulk: each carries its embedding (1.5 KB at 384 dimensions), and nothing else
deletes them. :func:`prune` deletes the decisions created before a cutoff, with their outcome and feedback,
``batch_size`` decisions per transaction, so each holds its locks
for a moment and the gateway's writers keep writing between batches. A router already published does not
need the rows it was trained on (the artifact holds its weights); retrain reads whatever its window
still finds. Routers' publish history and budget steering's state are small and never pruned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, delete, func, inspect, select, text
from sqlalchemy.orm import Session

from regret_gateway.store.schema import Base, Decision, Feedback, Outcome

PRUNE_BATCH = 5_000  # decisions per delete transaction


@dataclass(frozen=True)
class TableSize:
    """One table's rows and the bytes it takes on disk (indexes included; None where the database does not say)."""

    name: str
    rows: int
    bytes: int | None


def table_sizes(engine: Engine) -> list[TableSize]:
    """Rows and on-disk bytes of each of the store's tables that exists: PostgreSQL's
    ``pg_total_relation_size`` (table, indexes and TOAST), SQLite's ``dbstat`` (the table's pages and its
    indexes' pages; None where SQLite was built without it)."""
    present = set(inspect(engine).get_table_names())
    sizes = []
    with Session(engine) as session:
        for name, table in Base.metadata.tables.items():
            if name not in present:
                continue
            rows = int(session.scalar(select(func.count()).select_from(table)) or 0)
            sizes.append(TableSize(name, rows, _bytes(session, name, [ix.name for ix in table.indexes if ix.name])))
    return sizes


def _bytes(session: Session, table: str, indexes: list[str]) -> int | None:
    dialect = session.get_bind().dialect.name
    try:
        if dialect == "postgresql":
            return int(session.scalar(text("SELECT pg_total_relation_size(CAST(:t AS regclass))"), {"t": table}) or 0)
        if dialect == "sqlite":
            auto = [
                r[0]
                for r in session.execute(
                    text("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t"), {"t": table}
                )
            ]
            names = {table, *indexes, *auto}
            marks = ", ".join(f":n{i}" for i in range(len(names)))
            params = {f"n{i}": n for i, n in enumerate(sorted(names))}
            return int(session.scalar(text(f"SELECT SUM(pgsize) FROM dbstat WHERE name IN ({marks})"), params) or 0)
    except Exception:  # noqa: BLE001 - a size is informative; a database that cannot say gives None
        session.rollback()
    return None


@dataclass(frozen=True)
class PruneResult:
    """What :func:`prune` deleted (or, with ``dry_run``, would delete)."""

    cutoff: datetime
    decisions: int
    outcomes: int
    feedback: int
    batches: int
    dry_run: bool


def prune(
    engine: Engine,
    cutoff: datetime,
    *,
    batch_size: int = PRUNE_BATCH,
    dry_run: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> PruneResult:
    """Delete every decision created before ``cutoff`` (with its outcome and feedback), oldest first,
    ``batch_size`` decisions per transaction; ``on_batch(n)`` after each batch of n. With ``dry_run``,
    count what would go and delete nothing."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    old = Decision.created_at < cutoff
    with Session(engine) as session:
        decisions = int(session.scalar(select(func.count()).select_from(Decision).where(old)) or 0)
        outcomes, feedback = (
            int(session.scalar(select(func.count()).select_from(child).join(Decision, Decision.request_id == child.request_id).where(old)) or 0)
            for child in (Outcome, Feedback)
        )  # fmt: skip
    if dry_run or decisions == 0:
        return PruneResult(cutoff, decisions, outcomes, feedback, 0, dry_run)
    batches = 0
    while True:
        with Session(engine) as session, session.begin():
            ids = session.scalars(select(Decision.request_id).where(old).order_by(Decision.created_at).limit(batch_size)).all()
            if not ids:
                break
            session.execute(delete(Feedback).where(Feedback.request_id.in_(ids)))
            session.execute(delete(Outcome).where(Outcome.request_id.in_(ids)))
            session.execute(delete(Decision).where(Decision.request_id.in_(ids)))
        batches += 1
        if on_batch is not None:
            on_batch(len(ids))
    return PruneResult(cutoff, decisions, outcomes, feedback, batches, dry_run)
