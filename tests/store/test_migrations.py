"""The Alembic migrations create exactly the ORM's schema, on SQLite and PostgreSQL."""

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from regret_gateway.store.migrate import alembic_config, status, upgrade
from regret_gateway.store.partitions import autogenerate_filter, partitioned
from regret_gateway.store.schema import Base


def test_migrations_match_the_orm(engine):
    with engine.connect() as conn:
        diffs = compare_metadata(
            MigrationContext.configure(conn, opts={"include_object": autogenerate_filter(partitioned(conn))}), Base.metadata
        )
    assert diffs == []


def test_the_partial_index_of_the_embedded_decisions_is_the_orms(tmp_path):
    """compare_metadata does not read an index's WHERE: the migrated index and the ORM's are compared as SQLite
    writes them."""

    def index_sql(engine) -> str:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'ix_decisions_embedded'").scalar_one()

    migrated, declared = f"sqlite:///{tmp_path}/migrated.db", create_engine(f"sqlite:///{tmp_path}/declared.db")
    upgrade(migrated)
    Base.metadata.create_all(declared)
    assert " ".join(index_sql(create_engine(migrated)).split()) == " ".join(index_sql(declared).split())


def test_status_and_downgrade(db_url):
    assert status(db_url)["current"] is None and status(db_url)["pending"] == [
        "0001",
        "0002",
        "0003",
        "0004",
        "0005",
        "0006",
        "0007",
        "0008",
        "0009",
        "0010",
        "0011",
        "0012",
        "0013",
    ]
    upgrade(db_url)
    st = status(db_url)
    assert st["up_to_date"] and st["current"] == st["head"] == "0013" and st["pending"] == []
    command.downgrade(alembic_config(db_url), "base")
    eng = create_engine(db_url)
    assert set(inspect(eng).get_table_names()) == {"alembic_version"}
    eng.dispose()


def test_feedback_migration_keeps_scores_and_allows_a_score_per_source(db_url):
    """0003 keys feedback by (request_id, source): a stored score survives it, and a judge score can then sit
    beside the user's; downgrading keeps one (the latest) per request."""
    from sqlalchemy import text

    cfg = alembic_config(db_url)
    command.upgrade(cfg, "0002")
    eng = create_engine(db_url)
    with eng.begin() as conn:
        conn.execute(text(
            "INSERT INTO decisions (request_id, created_at, tier, lam, embedding_model, embedding_dim, embedding, "
            "chosen_model, propensity, mode, prompt_hash) VALUES ('r0', '2026-11-23 10:00:00', 't', 0, 'e', 1, :b, "
            "'m', 0.5, 'policy', 'h')"
        ), {"b": b"\0\0\0\0"})  # fmt: skip
        conn.execute(text("INSERT INTO feedback (request_id, score, source, created_at, updated_at, revision) "
                          "VALUES ('r0', 0.75, 'user', '2026-11-23 10:00:00', '2026-11-23 10:00:00', 1)"))  # fmt: skip
    upgrade(db_url)
    with eng.begin() as conn:
        conn.execute(text("INSERT INTO feedback (request_id, score, source, cost_usd, created_at, updated_at, revision) "
                          "VALUES ('r0', 0.0, 'judge', 0.001, '2026-11-23 11:00:00', '2026-11-23 11:00:00', 1)"))  # fmt: skip
        rows = sorted(conn.execute(text("SELECT source, score, cost_usd FROM feedback")).all())
    assert [tuple(r) for r in rows] == [("judge", 0.0, 0.001), ("user", 0.75, None)]
    command.downgrade(cfg, "0002")
    with eng.begin() as conn:
        assert [tuple(r) for r in conn.execute(text("SELECT source, score FROM feedback")).all()] == [("judge", 0.0)]
    eng.dispose()


def test_upgrade_on_a_passed_connection():
    """env.py reuses a connection given in config.attributes (in-memory SQLite survives only that way)."""
    eng = create_engine("sqlite://")
    with eng.connect() as conn:
        upgrade(connection=conn)
        assert {"decisions", "outcomes", "feedback", "router_versions"} <= set(inspect(conn).get_table_names())


def _migrate_after(barrier, url: str, results) -> None:
    from regret_gateway.store.migrate import upgrade as run_upgrade

    barrier.wait()
    try:
        run_upgrade(url)
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results.put(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


@pytest.mark.slow
def test_workers_migrating_at_the_same_moment_migrate_once(db_url):
    """Four processes start the migration at the same instant (as gateway workers starting together do):
    under the lock one migrates, the others wait and find the schema at head; none fails."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_migrate_after, args=(barrier, db_url, results)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    outcomes = [results.get(timeout=5) for _ in procs]
    assert outcomes == ["ok"] * 4, outcomes
    assert status(db_url)["up_to_date"]
