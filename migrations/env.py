"""Alembic environment of regret-gateway.

The URL comes from (first found): a connection passed in ``config.attributes["connection"]`` (tests
migrate an in-memory SQLite that way), the ``sqlalchemy.url`` option set by ``regret-gateway db``, the
settings (``REGRET_GATEWAY_STORE_URL`` or the default SQLite file in the working directory).
"""

from alembic import context

from regret_gateway.store.partitions import autogenerate_filter, partitioned
from regret_gateway.store.schema import Base

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from regret_gateway.config import load_settings

    return load_settings().store.url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True, include_object=autogenerate_filter(partitioned(connection)))
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from regret_gateway.store.engine import make_engine

    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
