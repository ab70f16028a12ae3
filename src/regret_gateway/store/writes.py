"""Writes over a :class:`~sqlalchemy.orm.Session`: the only code that inserts or updates rows.

Writes take batches of validated records and are idempotent on the request id: decisions and outcomes
already present are left as they are (but a ``failure`` outcome replaces a logged success: the proxy failed the
request after its answer arrived, :func:`_failures_replace`), feedback replaces the one current score (``revision`` counts the
re-scorings). Every check runs before the first write, so a refused batch changes nothing. The caller
owns the transaction (``with session.begin(): ...``). Reads: :mod:`~regret_gateway.store.queries` (audit,
status) and :mod:`~regret_gateway.store.rows` (a window's rows, for retrain).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

from sqlalchemy import select, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from regret_gateway.store import pg_copy
from regret_gateway.store.records import (
    DecisionRecord,
    FeedbackRecord,
    OutcomeRecord,
    StoreInputError,
    UnknownRequestError,
)
from regret_gateway.store.schema import Decision, Feedback, Outcome, RouterVersion, utcnow

ID_CHUNK = 1000  # ids per IN (...) list
_ROW_CHUNK = 1000  # rows per multi-row INSERT (SQLite allows 32,766 bound parameters)
UNIQUE_VIOLATION = "23505"  # PostgreSQL's SQLSTATE for a duplicate key


def chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _insert(session: Session):
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert
    raise NotImplementedError(f"the store supports SQLite and PostgreSQL, not {dialect!r}")


def _existing(session: Session, column, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for chunk in chunks(list(ids), ID_CHUNK):
        found.update(session.scalars(select(column).where(column.in_(chunk))))
    return found


def _unique_last(records: Sequence, key=lambda r: r.request_id) -> list:
    """One record per request id; the last one wins (a re-score within one batch)."""
    return list({key(r): r for r in records}.values())


def record_decisions(session: Session, records: Sequence[DecisionRecord]) -> int:
    """Insert decisions (and the outcomes riding on them). Returns the number of new decisions.

    Refuses the whole batch (:class:`StoreInputError`) when an embedding's size differs from other
    embeddings of the same embedding model, in the batch or already stored."""
    if not records:
        return 0
    dims: dict[str, int] = {}
    for r in records:
        expected = dims.setdefault(r.embedding_model, int(r.embedding.size))
        if r.embedding.size != expected:
            raise StoreInputError(
                f"request {r.request_id!r}: embedding has {r.embedding.size} values but other '{r.embedding_model}' "
                f"embeddings in this batch have {expected}"
            )
    for model, dim in dims.items():
        stored = session.scalar(select(Decision.embedding_dim).where(Decision.embedding_model == model).limit(1))
        if stored is not None and stored != dim:
            raise StoreInputError(f"embedding model '{model}' has {stored}-d embeddings in the store, got {dim}-d")
    new_rows = _insert_new(session, Decision, records)
    outcomes = [r.outcome for r in records if r.outcome is not None]
    if outcomes:
        _insert_new(session, Outcome, outcomes)
        _failures_replace(session, outcomes)
    return new_rows


def _failures_replace(session: Session, outcomes: Sequence[OutcomeRecord]) -> None:
    """A ``failure`` outcome of a request whose stored outcome is an answer (``success``, ``client_left``) replaces
    its status and error: the proxy failed the request after LiteLLM's success event (a check of LiteLLM's own
    after the answer arrived), so the client got an error. Its cost, tokens and answering model stay: the upstream
    was paid. Rows in request-id order (see :func:`record_feedback`)."""
    failed = sorted({r.request_id: r for r in outcomes if r.status == "failure"}.values(), key=lambda r: r.request_id)
    for r in failed:
        session.execute(
            update(Outcome)
            .where(Outcome.request_id == r.request_id, Outcome.status != "failure")
            .values(status="failure", error=r.error)
        )


def _insert_new(session: Session, table, records: Sequence) -> int:
    """Insert the records whose request id ``table`` does not hold yet (the first record of an id wins);
    returns how many. ON CONFLICT DO NOTHING covers a concurrent writer. PostgreSQL takes the rows by COPY
    (:func:`_copy_new`)."""
    first = {r.request_id: r for r in reversed(records)}
    if session.get_bind().dialect.name == "postgresql":
        return _copy_new(session, table, [first[rid] for rid in reversed(first)])
    present = _existing(session, table.request_id, list(first))
    new = [r for rid, r in first.items() if rid not in present]
    insert = _insert(session)
    for chunk in chunks(new, _ROW_CHUNK):
        rows = [r.row() for r in chunk]
        keep = _set_columns(rows, list(rows[0]))
        session.execute(
            insert(table).on_conflict_do_nothing(index_elements=["request_id"]), [{c: r[c] for c in keep} for r in rows]
        )
    return len(new)


def _set_columns(rows: Sequence[dict], columns: Sequence[str]) -> list[str]:
    """The ``columns`` some row sets (not None): a column no row of the batch sets is left to the table's NULL, so a
    store at an older revision, which lacks a newer column, takes records that do not use it (``bench prune``'s)."""
    return [c for c in columns if any(r.get(c) is not None for r in rows)]


def _copy(session: Session, table: str, columns: str, data: bytes) -> None:
    """COPY ``data`` (binary format) into ``table``; a refusal raises as SQLAlchemy would (IntegrityError...)."""
    connection = session.connection()
    statement = f"COPY {table} ({columns}) FROM STDIN WITH (FORMAT binary)"
    cursor = connection.connection.cursor()
    try:
        cursor.copy_expert(statement, io.BytesIO(data))
    except connection.dialect.loaded_dbapi.Error as exc:
        raise DBAPIError.instance(
            statement, None, exc, connection.dialect.loaded_dbapi.Error, dialect=connection.dialect
        ) from exc
    finally:
        cursor.close()


def _copy_new(session: Session, table, records: Sequence) -> int:
    """PostgreSQL: the batch goes in by COPY, one round trip, no per-row statement and no lookup of which ids
    exist. Straight into the table under a savepoint; where an id is there already (a replay, another
    replica) through a temporary staging table of the connection and one INSERT ... SELECT ... ON CONFLICT
    DO NOTHING, which keeps what the table holds."""
    if not records:
        return 0
    dicts = [r.row() for r in records]
    columns = _set_columns(dicts, [c.name for c in table.__table__.columns])
    names, name = ", ".join(columns), table.__tablename__
    rows = pg_copy.encode(table.__table__, columns, dicts)
    try:
        with session.begin_nested():
            _copy(session, name, names, rows)
        return len(records)
    except IntegrityError as exc:
        if getattr(exc.orig, "pgcode", None) != UNIQUE_VIOLATION:
            raise
    stage = f"rg_stage_{name}"
    connection = session.connection()
    connection.exec_driver_sql(f"CREATE TEMP TABLE IF NOT EXISTS {stage} (LIKE {name}) ON COMMIT DELETE ROWS")
    connection.exec_driver_sql(f"DELETE FROM {stage}")  # a second call in one transaction starts empty
    _copy(session, stage, names, rows)
    moved = connection.exec_driver_sql(
        f"INSERT INTO {name} ({names}) SELECT {names} FROM {stage} ON CONFLICT (request_id) DO NOTHING"
    )
    return int(moved.rowcount)


def unknown_request_ids(session: Session, ids: Sequence[str]) -> list[str]:
    """The ids among ``ids`` that have no routing decision, sorted."""
    return sorted(set(ids) - _existing(session, Decision.request_id, ids))


def _require_known(session: Session, ids: Sequence[str]) -> None:
    if unknown := unknown_request_ids(session, ids):
        raise UnknownRequestError(unknown)


def record_outcomes(session: Session, records: Sequence[OutcomeRecord], *, decisions_known: bool = False) -> int:
    """Insert outcomes of known decisions; the first outcome of a request is kept, but a failure replaces an
    answer (:func:`_failures_replace`). Returns new rows.
    ``decisions_known``: the caller committed these decisions itself (the gateway's writer), so the lookup
    is skipped; a decision gone since (pruned) fails the batch on the foreign key instead."""
    if not records:
        return 0
    if not decisions_known:
        _require_known(session, [r.request_id for r in records])
    new = _insert_new(session, Outcome, records)
    _failures_replace(session, records)
    return new


def record_feedback(session: Session, records: Sequence[FeedbackRecord]) -> int:
    """Set the current quality score of known requests, one per request and source (insert, or replace
    and bump ``revision``): a user's score and the judge's live side by side. Returns records applied."""
    if not records:
        return 0
    # rows in one order whoever writes them: two batches of the same ids in opposite orders then wait for each
    # other's locks instead of deadlocking (PostgreSQL locks a statement's rows in the order it lists them)
    latest = sorted(_unique_last(records, key=lambda r: (r.request_id, r.source)), key=lambda r: (r.request_id, r.source))
    _require_known(session, [r.request_id for r in latest])
    insert = _insert(session)
    for chunk in chunks(latest, _ROW_CHUNK):
        stmt = insert(Feedback)
        stmt = stmt.on_conflict_do_update(
            index_elements=["request_id", "source"],
            set_={
                "score": stmt.excluded.score,
                "cost_usd": stmt.excluded.cost_usd,
                "updated_at": stmt.excluded.updated_at,
                "revision": Feedback.revision + 1,
            },
        )
        session.execute(
            stmt,
            [
                {
                    "request_id": r.request_id,
                    "score": r.score,
                    "source": r.source,
                    "cost_usd": r.cost_usd,
                    "created_at": r.created_at,
                    "updated_at": r.created_at,
                    "revision": 1,
                }
                for r in chunk
            ],
        )
    return len(latest)


def record_version(session: Session, version_id: str, artifact_path: str, metrics: dict) -> None:
    """Add a published router version to the history (its folder and retrain's metrics); the active one is
    what the artifact folder's ``ACTIVE`` names."""
    session.add(RouterVersion(id=version_id, artifact_path=artifact_path, metrics=metrics, created_at=utcnow()))
