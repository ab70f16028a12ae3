"""How much the store holds; pruning what is older than the retention period, and the embeddings that can no
longer train.

Decisions are the store's bulk: each carries its embedding (1.5 KB at 384 dimensions) while it may still be
scored, and nothing else deletes them. :func:`drop_embeddings` drops the embedding of every decision made before
a cutoff (the score window) that has no score: only a scored decision trains, so at steady state the store keeps
a full embedding for the window's decisions and the scored ones, and about 0.4 KB for every other decision
(docs/experiments/window-read.md).
:func:`prune` deletes the decisions created before a cutoff (the retention period), with their outcome and
feedback: on a partitioned PostgreSQL store a day at a time, each day's partitions dropped whole
(:mod:`~regret_gateway.store.partitions`). Row by row, both work ``batch_size`` decisions per transaction, so each holds its locks for a moment and the
gateway's writers keep writing between batches. A router already published does not
need the rows it was trained on (the artifact holds its weights); retrain reads whatever its window
still finds. Routers' publish history and budget steering's state are small and never pruned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, time, timezone
from typing import cast

from sqlalchemy import ColumnElement, CursorResult, Engine, column, delete, func, inspect, select, table, text, tuple_, update
from sqlalchemy.orm import Session

from regret_gateway.store.partitions import default_partition, drop_days, old_days, partitioned
from regret_gateway.store.schema import DROPPED, Base, Decision, Feedback, Outcome, embedded

PRUNE_BATCH = 5_000  # decisions per delete transaction


@dataclass(frozen=True)
class TableSize:
    """One table's rows and the bytes it takes on disk (indexes included; None where the database does not say)."""

    name: str
    rows: int
    bytes: int | None


def table_sizes(engine: Engine) -> list[TableSize]:
    """Rows and on-disk bytes of each of the store's tables that exists: PostgreSQL's
    ``pg_total_relation_size`` (table, indexes and TOAST; a partitioned table's summed over its partitions), SQLite's ``dbstat`` (the table's pages and its
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
            tree = (
                "SELECT COALESCE(SUM(pg_total_relation_size(p.relid)), pg_total_relation_size(CAST(:t AS regclass))) "
                "FROM pg_partition_tree(CAST(:t AS regclass)) AS p WHERE p.isleaf"
            )  # a partitioned table: its partitions
            return int(session.scalar(text(tree), {"t": table}) or 0)
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
    """What :func:`prune` deleted (or, with ``dry_run``, would delete); ``days``: the day partitions among them,
    dropped whole (a partitioned PostgreSQL store), the rest deleted ``batches`` by batch."""

    cutoff: datetime
    decisions: int
    outcomes: int
    feedback: int
    batches: int
    dry_run: bool
    days: int = 0


def prune(
    engine: Engine,
    cutoff: datetime,
    *,
    batch_size: int = PRUNE_BATCH,
    dry_run: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> PruneResult:
    """Delete every decision created before ``cutoff`` (with its outcome and feedback); ``on_batch(n)`` after
    each n decisions. On a partitioned PostgreSQL store (:mod:`~regret_gateway.store.partitions`) the cutoff is
    the start of its UTC day and the days before it are dropped whole; the rest (every row on SQLite, the default
    partition's rows on PostgreSQL) is deleted oldest first, ``batch_size`` decisions per transaction. With
    ``dry_run``, count what would go and delete nothing."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    with engine.connect() as conn:
        whole = partitioned(conn)
        if whole:
            cutoff = datetime.combine(cutoff.astimezone(timezone.utc).date(), time(), tzinfo=timezone.utc)
        days = old_days(conn, cutoff.date()) if whole else []
    # the rows deleted one by one: on a partitioned store those that no day partition holds
    rows = table(default_partition("decisions"), column("request_id"), column("created_at")) if whole else Decision.__table__
    old = rows.c.created_at < cutoff
    with Session(engine) as session:
        decisions = int(session.scalar(select(func.count()).select_from(rows).where(old)) or 0)
        outcomes, feedback = (
            int(session.scalar(select(func.count()).select_from(child).join(rows, rows.c.request_id == child.request_id).where(old)) or 0)
            for child in (Outcome, Feedback)
        )  # fmt: skip
    total = PruneResult(cutoff, decisions + sum(d.decisions for d in days), outcomes + sum(d.outcomes for d in days),
                        feedback + sum(d.feedback for d in days), 0, dry_run, len(days))  # fmt: skip
    if dry_run:
        return total
    drop_days(engine, days, on_day=None if on_batch is None else lambda rows: on_batch(rows.decisions))
    return replace(total, batches=_delete_rows(engine, rows, old, batch_size, on_batch) if decisions else 0)


def _delete_rows(engine: Engine, rows, old: ColumnElement[bool], batch_size: int, on_batch: Callable[[int], None] | None) -> int:
    """Delete the decisions of ``rows`` (the table, or its default partition) that match ``old`` with their
    outcomes and scores, oldest first, a batch per transaction; returns the batches."""
    batches = 0
    while True:
        with Session(engine) as session, session.begin():
            ids = session.scalars(select(rows.c.request_id).where(old).order_by(rows.c.created_at).limit(batch_size)).all()
            if not ids:
                return batches
            session.execute(delete(Feedback).where(Feedback.request_id.in_(ids)))
            session.execute(delete(Outcome).where(Outcome.request_id.in_(ids)))
            session.execute(delete(Decision).where(Decision.request_id.in_(ids)))
        batches += 1
        if on_batch is not None:
            on_batch(len(ids))


def drop_embeddings(
    engine: Engine,
    cutoff: datetime,
    *,
    batch_size: int = PRUNE_BATCH,
    dry_run: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Drop (empty: :data:`~regret_gateway.store.schema.DROPPED`) the embedding of every decision created before
    ``cutoff`` that no source has scored, ``batch_size`` decisions per transaction, oldest first; ``on_batch(n)``
    after each batch of n. Returns how many were (with ``dry_run``: would be) dropped. A score that comes later
    is stored; retrain's training set (and so the savings report's quality) leaves its row out as
    ``embedding_dropped``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    unscored = (
        Decision.created_at < cutoff,
        embedded(),
        ~select(Feedback.request_id).where(Feedback.request_id == Decision.request_id).exists(),
    )
    if dry_run:
        with Session(engine) as session:
            return int(session.scalar(select(func.count()).select_from(Decision).where(*unscored)) or 0)
    dropped, after = 0, None
    while True:
        with Session(engine) as session, session.begin():
            page = select(Decision.created_at, Decision.request_id).where(*unscored)
            if after is not None:  # keyset: each batch starts where the last one ended, never at the oldest again
                page = page.where(tuple_(Decision.created_at, Decision.request_id) > tuple_(*after))
            keys = session.execute(page.order_by(Decision.created_at, Decision.request_id).limit(batch_size)).all()
            if not keys:
                break
            after = tuple(keys[-1])
            ids = [k[1] for k in keys]  # a decision scored since it was read keeps its embedding
            done = cast(
                CursorResult,
                session.execute(update(Decision).where(Decision.request_id.in_(ids), *unscored).values(embedding=DROPPED)),
            )
        dropped += done.rowcount
        if on_batch is not None:
            on_batch(len(ids))
    return dropped
