"""The Alembic migrations create exactly the ORM's schema, on SQLite and PostgreSQL."""

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from regret_gateway.store.migrate import alembic_config, status, upgrade
from regret_gateway.store.schema import Base


def test_migrations_match_the_orm(engine):
    with engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diffs == []


def test_status_and_downgrade(db_url):
    assert status(db_url)["current"] is None and status(db_url)["pending"] == ["0001", "0002"]
    upgrade(db_url)
    st = status(db_url)
    assert st["up_to_date"] and st["current"] == st["head"] == "0002" and st["pending"] == []
    command.downgrade(alembic_config(db_url), "base")
    eng = create_engine(db_url)
    assert set(inspect(eng).get_table_names()) == {"alembic_version"}
    eng.dispose()


def test_upgrade_on_a_passed_connection():
    """env.py reuses a connection given in config.attributes (in-memory SQLite survives only that way)."""
    eng = create_engine("sqlite://")
    with eng.connect() as conn:
        upgrade(connection=conn)
        assert {"decisions", "outcomes", "feedback", "router_versions"} <= set(inspect(conn).get_table_names())
