"""Alembic from Python: ``upgrade`` and ``status`` on a URL or an open connection.

The migration scripts live in the repository's top-level ``migrations/`` and are installed with the
package as ``regret_gateway.migrations``, so ``regret-gateway db upgrade`` works from a wheel.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, make_url
from sqlalchemy.exc import SQLAlchemyError

from regret_gateway.store.engine import make_engine
from regret_gateway.store.locks import advisory_lock, file_lock
from regret_gateway.store.partitions import ensure_days

log = logging.getLogger(__name__)


def migrations_dir() -> Path:
    return Path(str(resources.files("regret_gateway.migrations")))


def alembic_config(url: str | None = None, connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def upgrade(url: str | None = None, *, revision: str = "head", connection: Connection | None = None) -> None:
    """Migrate the database at ``url`` (or on ``connection``) to ``revision``.

    With a URL the migration runs under a lock, so that gateway workers starting together migrate once and
    the others wait, then find nothing to do: a PostgreSQL advisory lock (held on the migrating
    connection), or for an SQLite file an exclusive ``flock`` on ``<file>.migrate-lock``. A partitioned
    PostgreSQL store then gets the coming days' partitions (:func:`~regret_gateway.store.partitions.ensure_days`)."""
    if connection is not None or url is None:
        command.upgrade(alembic_config(url, connection), revision)
        return
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        engine = make_engine(url)
        try:
            with advisory_lock(engine, "migrations"), engine.connect() as conn:
                command.upgrade(alembic_config(url, conn), revision)
                conn.commit()
            _make_days(engine)
        finally:
            engine.dispose()
        return
    database = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:":
        command.upgrade(alembic_config(url), revision)
        return
    with file_lock(f"{database}.migrate-lock"):
        command.upgrade(alembic_config(url), revision)


def _make_days(engine) -> None:
    """The coming days' partitions; a store that refuses them (a user without CREATE on its schema) is warned
    about, not failed: those days' rows go to the default partition, pruned row by row, until `db prune` (run
    with the rights to) makes them."""
    try:
        ensure_days(engine, datetime.now(timezone.utc).date())
    except SQLAlchemyError as exc:
        log.warning("regret-gateway: the coming days' partitions were not made (%s); their rows go to the default "
                    "partitions until `db prune` makes them", str(exc).splitlines()[0])  # fmt: skip


def status(url: str) -> dict:
    """Current revision, head revision and the revisions still to apply."""
    script = ScriptDirectory.from_config(alembic_config(url))
    head = script.get_current_head()
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
    pending = [rev.revision for rev in script.iterate_revisions(head, current)] if current != head else []
    return {
        "url": engine.url.render_as_string(hide_password=True),
        "current": current,
        "head": head,
        "pending": list(reversed(pending)),
        "up_to_date": current == head,
    }
