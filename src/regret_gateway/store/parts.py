"""The store as Parquet day parts, and a window's rows read from them with DuckDB: how retrain reads a window
too large to walk in the database (docs/operations.md, "A platform's scale").

``export_days`` writes each whole UTC day once: ``decisions/<day>.parquet`` (the day's decisions with their
outcomes, without embeddings: about 100 bytes a decision), ``feedback/<day>.parquet`` (the scores written or
revised that day, whatever day their request was made) and ``embeddings/<day>.parquet`` (the embeddings of the
requests scored that day): an embedding is exported only for a request that has a score, the only kind that
can train. A day is exported once it is over, so a daily run adds one day of each; a part is written under a
temporary name and moved into place, so a folder never holds half a part. Where the parts
live is a URL: a folder here, object storage where pyarrow writes and DuckDB reads it (``s3://...``).

:class:`PartsRows` answers what :class:`~regret_gateway.store.rows.StoreRows` answers, from the parts: the
window's decisions selected, the scores joined (a request's latest score per source), why unscored ones
could not train counted, all in DuckDB's queries streaming over the parts (what is held is the window's scores
and scored decisions); the embeddings read for the kept rows only, from the parts of the days they were scored. The same rows
the store gives over the days exported (a test compares them), so retrain's rules
(:mod:`regret_gateway.trainset.window`) make the same training set of either. Needs the ``scale`` extra
(duckdb, pyarrow)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from regret_gateway.store.rows import EMBEDDING_DROPPED, READ_CHUNK, DecisionRow, ScoreRow, WindowRows, as_text, naive_utc
from regret_gateway.store.schema import Decision, Feedback, Outcome, embedded

DECISIONS, FEEDBACK, EMBEDDINGS = "decisions", "feedback", "embeddings"
KINDS = (DECISIONS, FEEDBACK, EMBEDDINGS)
# The decision columns a part holds, then the outcome's (None where the request has none).
DECISION_COLUMNS = ("request_id", "created_at", "team", "tier", "lam", "router_version", "embedding_model",
                    "embedding_dim", "chosen_model", "propensity", "mode", "mock", "session_turn", "app",
                    "greedy_model", "propensities")  # fmt: skip
OUTCOME_COLUMNS = ("cost_usd", "status", "answered_model")
FEEDBACK_COLUMNS = ("request_id", "source", "score", "cost_usd", "updated_at")
# then ``embedded``: whether the request still held its embedding when the score was exported (False: dropped,
# unscored past the score window: the row cannot train, store.retention.drop_embeddings)
LAG = timedelta(hours=1)  # a day is exported once it has been over this long (its last requests' outcomes written)


def _arrow():
    try:
        import pyarrow
        import pyarrow.fs
        import pyarrow.parquet
    except ImportError as exc:  # pragma: no cover - the scale extra
        raise ImportError("Parquet day parts need pyarrow: pip install 'regret-gateway[scale]'") from exc
    return pyarrow


def _duckdb():
    try:
        import duckdb
    except ImportError as exc:  # pragma: no cover - the scale extra
        raise ImportError("reading Parquet day parts needs DuckDB: pip install 'regret-gateway[scale]'") from exc
    return duckdb


def _filesystem(url: str) -> tuple[Any, str]:
    """(pyarrow filesystem, root path in it) of a folder path or URL."""
    pa = _arrow()
    if "://" not in url:
        return pa.fs.LocalFileSystem(), os.path.abspath(url)
    return pa.fs.FileSystem.from_uri(url)


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=timezone.utc)


@dataclass(frozen=True)
class DayExport:
    """What one ``export_days`` run wrote: the days it added, their rows, and the days already there."""

    days: tuple[str, ...]
    decisions: int
    scores: int
    already: int  # days found exported before this run


def exported_days(url: str, kind: str = DECISIONS) -> list[str]:
    """The days (``YYYY-MM-DD``) whose ``kind`` part is in the folder at ``url``, in order."""
    pa = _arrow()
    fs, root = _filesystem(url)
    found = fs.get_file_info(pa.fs.FileSelector(f"{root}/{kind}", allow_not_found=True))
    return sorted(
        f.base_name[: -len(".parquet")] for f in found if f.base_name.endswith(".parquet") and not f.base_name.startswith(".")
    )


def _complete_days(url: str) -> set[str]:
    """The days whose every kind of part is there."""
    return set.intersection(*(set(exported_days(url, kind)) for kind in KINDS))


def days_to_export(session: Session, url: str, until: datetime | None = None) -> list[date]:
    """The whole UTC days that ended by ``until`` (at most, and by default, :data:`LAG` ago) from the store's first
    decision or score on, whose parts are not in the folder yet."""
    return _missing_days(session, _complete_days(url), until)


def _missing_days(session: Session, have: set[str], until: datetime | None) -> list[date]:
    latest = naive_utc(datetime.now(timezone.utc) - LAG)  # a day not yet over is never written: it would stay half
    end = min(naive_utc(until), latest) if until is not None else latest
    first = [
        t
        for t in (session.scalar(select(func.min(Decision.created_at))), session.scalar(select(func.min(Feedback.updated_at))))
        if t is not None
    ]
    if not first:
        return []
    start = min(naive_utc(t) for t in first).date()
    return [d for d in (start + timedelta(days=i) for i in range((end.date() - start).days)) if d.isoformat() not in have]


def export_days(session: Session, url: str, *, until: datetime | None = None, days: Sequence[date] | None = None,
                on_day: Callable[[int], None] | None = None) -> DayExport:  # fmt: skip
    """Write the parts of every whole day not yet exported (``days``, default :func:`days_to_export`'s, as a
    caller that sized a progress bar by them passes); ``on_day(1)`` after each. Rows are read and written in
    chunks: memory follows a chunk, not a day."""
    pa = _arrow()
    fs, root = _filesystem(url)
    have = _complete_days(url)
    days = _missing_days(session, have, until) if days is None else days
    decisions = scores = 0
    for day in days:
        a, b = _day_start(day), _day_start(day + timedelta(days=1))
        columns = [as_text(Decision.propensities) if c == "propensities" else getattr(Decision, c) for c in DECISION_COLUMNS]
        columns += [getattr(Outcome, c) for c in OUTCOME_COLUMNS]
        q = (select(*columns).select_from(Decision).outerjoin(Outcome, Outcome.request_id == Decision.request_id)
             .where(Decision.created_at >= a, Decision.created_at < b).order_by(Decision.created_at, Decision.request_id))  # fmt: skip
        decisions += _write(pa, fs, f"{root}/{DECISIONS}", day, schema_of(DECISIONS), session, q, (1,))
        scored_that_day = (Feedback.updated_at >= a, Feedback.updated_at < b)
        has_embedding = embedded().label("embedded")
        q = (select(*(getattr(Feedback, c) for c in FEEDBACK_COLUMNS), has_embedding)
             .join(Decision, Decision.request_id == Feedback.request_id).where(*scored_that_day))  # fmt: skip
        scores += _write(pa, fs, f"{root}/{FEEDBACK}", day, schema_of(FEEDBACK), session, q, (4,))
        ids = select(Feedback.request_id).where(*scored_that_day).distinct().scalar_subquery()
        q = select(Decision.request_id, Decision.embedding).where(Decision.request_id.in_(ids), embedded())
        _write(pa, fs, f"{root}/{EMBEDDINGS}", day, schema_of(EMBEDDINGS), session, q, ())
        if on_day is not None:
            on_day(1)
    return DayExport(tuple(d.isoformat() for d in days), decisions, scores, len(have))


def schema_of(kind: str):
    """The Arrow schema of a ``kind`` part (:data:`KINDS`)."""
    pa = _arrow()
    s, f64, at = pa.string(), pa.float64(), pa.timestamp("us")
    if kind == DECISIONS:
        types = {"created_at": at, "lam": f64, "embedding_dim": pa.int32(), "propensity": f64, "mock": pa.bool_(), "cost_usd": f64}  # fmt: skip
        return pa.schema([(c, types.get(c, s)) for c in (*DECISION_COLUMNS, *OUTCOME_COLUMNS)])
    if kind == FEEDBACK:
        return pa.schema([("request_id", s), ("source", s), ("score", f64), ("cost_usd", f64), ("updated_at", at),
                          ("embedded", pa.bool_())])  # fmt: skip
    return pa.schema([("request_id", s), ("embedding", pa.binary())])


def _write(pa, fs, folder: str, day: date, schema, session: Session, query, times: tuple[int, ...]) -> int:
    """Stream ``query``'s rows into ``folder/<day>.parquet`` (written under a temporary name, then moved);
    the columns at ``times`` made naive UTC. Returns the rows written."""
    fs.create_dir(folder, recursive=True)
    final, tmp = f"{folder}/{day.isoformat()}.parquet", f"{folder}/.{day.isoformat()}.parquet.tmp"
    n = 0
    with fs.open_output_stream(tmp) as out, pa.parquet.ParquetWriter(out, schema, compression="zstd") as writer:
        for chunk in _chunks(session.execute(query.execution_options(yield_per=READ_CHUNK))):
            cols: list[Any] = [list(c) for c in zip(*chunk)]
            for i in times:
                cols[i] = [naive_utc(t) for t in cols[i]]
            writer.write_batch(
                pa.record_batch([pa.array(c, type=schema.field(i).type) for i, c in enumerate(cols)], schema=schema)
            )
            n += len(chunk)
    fs.move(tmp, final)
    return n


def _chunks(result) -> Iterator[list]:
    while chunk := result.fetchmany(READ_CHUNK):
        yield chunk


# The reason a decision's outcome keeps it from training, in DuckDB's SQL: store.rows.outcome_reason's, alike
# (a scored decision whose embedding was dropped: EMBEDDING_DROPPED, from its scores' ``embedded``).
_REASON = (
    "CASE WHEN mock THEN 'mock' WHEN cost_usd IS NULL THEN 'no_outcome' WHEN status = 'client_left' THEN 'client_left' "
    "WHEN status <> 'success' THEN 'failed' "
    "WHEN answered_model IS NOT NULL AND answered_model <> chosen_model THEN 'answered_by_other' END"
)


# The fields of a row that repeat across rows (a platform's teams, tiers, models, sources): held once each.
_REPEATED = {ScoreRow: ("source", "team", "answered", "app"),
             DecisionRow: ("team", "tier", "router_version", "embedding_model", "chosen_model", "mode", "reason",
                           "session_turn", "greedy_model", "app")}  # fmt: skip


def _rows(result, kind) -> list:
    """``result``'s rows as ``kind`` (a NamedTuple), fetched a chunk at a time, each repeated value one object:
    memory follows the window's scored rows at about a third of a tuple of fresh strings each."""
    pool: dict = {}
    at = [kind._fields.index(f) for f in _REPEATED[kind]]
    rows = []
    for chunk in _chunks(result):
        for r in chunk:
            r = list(r)
            for i in at:
                r[i] = pool.setdefault(r[i], r[i])
            rows.append(kind._make(r))
    return rows


class PartsRows:
    """A window's rows read from the day parts at ``url`` with DuckDB (module doc)."""

    def __init__(self, url: str, *, threads: int | None = None):
        self.url = url
        self._fs, self._root = _filesystem(url)
        self._prefix = "" if "://" not in url else url.split("://", 1)[0] + "://"
        self._db = _duckdb().connect(config={"threads": threads} if threads else {})
        self._db.execute("SET enable_progress_bar = false")  # retrain prints its own progress
        self._first: date | None = None  # the window's first day: scores (and their embeddings) come on or after it

    def _files(self, kind: str, first: date | None = None, last: date | None = None) -> list[str]:
        days = [d for d in exported_days(self.url, kind)
                if (first is None or d >= first.isoformat()) and (last is None or d <= last.isoformat())]  # fmt: skip
        return [f"{self._prefix}{self._root}/{kind}/{d}.parquet" for d in days]

    def window(self, since: datetime | None, until: datetime | None, team: str | None) -> WindowRows:
        since_, until_ = (None if t is None else naive_utc(t) for t in (since, until))
        last = None if until_ is None else (until_ - timedelta(microseconds=1)).date()
        self._first = None if since_ is None else since_.date()
        decision_files, feedback_files = self._files(DECISIONS, self._first, last), self._files(FEEDBACK, self._first)
        if not decision_files:
            return WindowRows([], [], {})
        where, params = ["true"], list[Any]([decision_files])
        for cond, value in (("created_at >= ?", since_), ("created_at < ?", until_), ("team = ?", team)):
            if value is not None:
                where.append(cond)
                params.append(value)
        # by name: a day exported before a column existed (``propensities``) reads NULL there
        db, decisions = self._db, f"read_parquet(?, union_by_name = true) WHERE {' AND '.join(where)}"
        if feedback_files:
            db.execute("CREATE OR REPLACE TEMP TABLE f AS SELECT request_id, source, score, cost_usd, embedded FROM read_parquet(?) "
                       "QUALIFY row_number() OVER (PARTITION BY request_id, source ORDER BY updated_at DESC) = 1",
                       [feedback_files])  # fmt: skip
        else:
            db.execute("CREATE OR REPLACE TEMP TABLE f (request_id VARCHAR, source VARCHAR, score DOUBLE, cost_usd DOUBLE, "
                       "embedded BOOLEAN)")  # fmt: skip
        # the window's scored decisions are held; the others are counted by reason as the parts stream by
        db.execute(f"CREATE OR REPLACE TEMP TABLE d AS SELECT *, coalesce({_REASON}, CASE WHEN request_id IN (SELECT "
                   f"request_id FROM f GROUP BY request_id HAVING NOT bool_or(embedded)) THEN '{EMBEDDING_DROPPED}' END) "
                   f"AS reason FROM {decisions} AND request_id IN (SELECT request_id FROM f)", params)  # fmt: skip
        unscored = db.execute(f"SELECT {_REASON} AS reason, count(*) FROM {decisions} "
                              "AND request_id NOT IN (SELECT request_id FROM f) GROUP BY reason", params).fetchall()  # fmt: skip
        scores = _rows(db.execute("SELECT f.request_id, f.source, f.score, f.cost_usd, d.team, coalesce(d.answered_model, "
                                  "d.chosen_model), d.app FROM f JOIN d USING (request_id)"), ScoreRow)  # fmt: skip
        have = {row[0] for row in db.execute("DESCRIBE d").fetchall()}
        fields = [f if f in have else f"NULL AS {f}" for f in DecisionRow._fields]  # every day older than a column
        scored = _rows(db.execute(f"SELECT {', '.join(fields)} FROM d"), DecisionRow)
        db.execute("DROP TABLE d; DROP TABLE f")
        return WindowRows(scores, scored, {r: int(n) for r, n in unscored})

    def embeddings(self, ids: Sequence[str], dim: int) -> np.ndarray:
        """The embeddings of ``ids`` (scored requests of the window), from the parts of the days they were scored
        on or after the window's first. Read as Arrow columns into one float32 array (no Python object a row)."""
        pa = _arrow()
        wanted = pa.table({"request_id": pa.array(list(ids), type=pa.string()), "at": pa.array(np.arange(len(ids)))})
        self._db.register("wanted", wanted)
        try:
            rel = self._db.sql("SELECT w.at, p.embedding FROM read_parquet(?) p JOIN wanted w USING (request_id)",
                               params=[self._files(EMBEDDINGS, self._first)])  # fmt: skip
            got = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()  # DuckDB 2, DuckDB 1
        finally:
            self._db.unregister("wanted")
        X = np.empty((len(ids), dim), dtype=np.float32)
        found = np.zeros(len(ids), dtype=bool)
        for at, blobs in zip(got.column("at").chunks, got.column("embedding").chunks):
            rows = at.to_numpy()
            X[rows] = _float32_rows(blobs, dim)  # a request scored on two days has its embedding twice: the same
            found[rows] = True
        if not found.all():
            raise RuntimeError(f"{int((~found).sum())} of the window's rows have no embedding in the parts at {self.url}")
        return X


def _float32_rows(blobs, dim: int) -> np.ndarray:
    """(len, dim) float32 of an Arrow binary array whose every value is ``dim`` little-endian float32s."""
    offsets = np.frombuffer(blobs.buffers()[1], dtype=np.int64 if blobs.type == _arrow().large_binary() else np.int32)
    offsets = offsets[blobs.offset : blobs.offset + len(blobs) + 1]
    if len(blobs) and not np.all(np.diff(offsets) == 4 * dim):
        raise ValueError(f"an embedding in the parts is not {dim} float32 values")
    data = np.frombuffer(blobs.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]] if len(blobs) else np.zeros(0, np.uint8)
    return data.view("<f4").reshape(-1, dim)
