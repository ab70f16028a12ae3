"""Engines: a hung PostgreSQL cancels the statement instead of holding the caller."""

import pytest


def test_a_statement_timeout_cancels_a_hung_query_on_postgresql(db_url):
    """The gateway's engine gives every statement a budget: a server that does not answer cancels the
    statement instead of holding the caller (PostgreSQL; SQLite has no server to hang)."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from regret_gateway.store.engine import make_engine

    if not db_url.startswith("postgresql"):
        pytest.skip("statement timeouts are a PostgreSQL setting")
    engine = make_engine(db_url, statement_timeout_ms=200)
    try:
        with engine.connect() as conn:
            with pytest.raises(OperationalError, match="statement timeout"):
                conn.execute(text("SELECT pg_sleep(2)"))
    finally:
        engine.dispose()
