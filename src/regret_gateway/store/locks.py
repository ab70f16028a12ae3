"""Locks that order work across processes and machines: an exclusive ``flock`` on a file, and a PostgreSQL
advisory lock held on one connection. Migrations and publishing a router take them."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Engine, text


def lock_key(name: str) -> int:
    """The PostgreSQL advisory lock id of ``name`` (stable across processes and versions)."""
    return zlib.crc32(f"regret-gateway {name}".encode())


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing): one holder at a time, in any process."""
    import fcntl

    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def advisory_lock(engine: Engine, name: str) -> Iterator[None]:
    """Hold PostgreSQL's session advisory lock ``lock_key(name)`` on a connection of its own (waits for the
    holder, in any process on any machine). On another database, nothing is held."""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": lock_key(name)})
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": lock_key(name)})
            conn.commit()
