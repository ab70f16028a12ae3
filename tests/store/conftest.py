"""Store fixtures: every store test runs on SQLite and on the PostgreSQL at 127.0.0.1:5432 (db `test`).

PostgreSQL tests use a fresh schema each (dropped afterwards). Where the server cannot be reached they
skip -- except when REGRET_GATEWAY_REQUIRE_PG=1 (set by .ci/run), where they fail.
"""

from __future__ import annotations

import os
import uuid

import pytest
from sqlalchemy import text

from regret_gateway.store.engine import make_engine
from regret_gateway.store.migrate import upgrade

PG_URL = os.environ.get("REGRET_GATEWAY_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")


def _pg_admin():
    engine = make_engine(PG_URL, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any failure means "no server"
        engine.dispose()
        if os.environ.get("REGRET_GATEWAY_REQUIRE_PG") == "1":
            pytest.fail(f"PostgreSQL required (REGRET_GATEWAY_REQUIRE_PG=1) but unreachable at {PG_URL}: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {PG_URL}")
    return engine


def with_search_path(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """An empty database URL (not migrated)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/store.db"
        return
    admin = _pg_admin()
    schema = f"rg_test_{uuid.uuid4().hex[:10]}"
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield with_search_path(PG_URL, schema)
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def engine(db_url):
    """A migrated database (through the Alembic migrations, as a deployment does)."""
    upgrade(db_url)
    eng = make_engine(db_url)
    yield eng
    eng.dispose()
