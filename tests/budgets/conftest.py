"""The budget controller's tests run on SQLite and PostgreSQL, as the store's do."""

from tests.store.conftest import db_url, engine  # noqa: F401  (the store's fixtures)
