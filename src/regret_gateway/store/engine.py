"""Engines for the store: SQLite (the embedded default) or PostgreSQL (production), same code."""

from __future__ import annotations

from sqlalchemy import Engine, create_engine, event


def make_engine(url: str, *, sqlite_busy_timeout_ms: int = 5000, statement_timeout_ms: int | None = None, **kwargs) -> Engine:
    """An engine for ``url``. SQLite gets WAL, foreign keys and a busy timeout (several gateway workers
    may share one file); other databases get ``pool_pre_ping`` so a restarted server is noticed."""
    if url.startswith("sqlite"):
        engine = create_engine(url, **kwargs)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:  # pragma: no cover - exercised through every sqlite test
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA busy_timeout={int(sqlite_busy_timeout_ms)}")
            if ":memory:" not in url and url not in ("sqlite://", "sqlite:///"):
                cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        return engine
    kwargs.setdefault("pool_pre_ping", True)
    if "connect_timeout" not in url:  # an unreachable server fails in seconds instead of the OS's minutes
        kwargs["connect_args"] = {"connect_timeout": 5, **kwargs.get("connect_args", {})}
    engine = create_engine(url, **kwargs)
    if statement_timeout_ms is not None and engine.dialect.name == "postgresql":

        @event.listens_for(engine, "connect")
        def _statement_timeout(dbapi_conn, _record) -> None:  # a hung server cancels the statement, not us
            cur = dbapi_conn.cursor()
            cur.execute(f"SET statement_timeout = {int(statement_timeout_ms)}")
            cur.close()
            dbapi_conn.commit()

    return engine
