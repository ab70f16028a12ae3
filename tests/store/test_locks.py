"""The cross-process locks that order migrations and publishing: while one holder has a lock, nobody else gets it."""

import fcntl

import pytest

from regret_gateway.store.engine import make_engine
from regret_gateway.store.locks import advisory_lock, file_lock, lock_key
from tests.store.conftest import PG_URL, _pg_admin


def _free(path) -> bool:
    """Whether another open file description could take the ``flock`` on ``path`` now (without waiting)."""
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fh, fcntl.LOCK_UN)
        return True


def test_a_file_lock_is_held_for_its_block_and_released_after_it_even_on_an_error(tmp_path):
    path = tmp_path / ".publish-lock"
    with file_lock(path):
        assert path.exists() and not _free(path)
    assert _free(path)
    with pytest.raises(RuntimeError), file_lock(path):
        raise RuntimeError("the publisher failed")
    assert _free(path)


def test_an_advisory_lock_is_held_on_postgresql_for_its_block_and_released_after_it():
    admin = _pg_admin()
    engine = make_engine(PG_URL)
    key = lock_key("test-locks")
    assert key != lock_key("publish") and key == lock_key("test-locks")  # one id per name, the same in every process

    def free() -> bool:
        with admin.connect() as conn:
            taken = conn.exec_driver_sql(f"SELECT pg_try_advisory_lock({key})").scalar()
            if taken:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({key})")
            return bool(taken)

    try:
        with advisory_lock(engine, "test-locks"):
            assert not free()  # another session (another process, another machine) waits
        assert free()
        with pytest.raises(RuntimeError), advisory_lock(engine, "test-locks"):
            raise RuntimeError("the migration failed")
        assert free()
    finally:
        engine.dispose()
        admin.dispose()


def test_an_advisory_lock_on_sqlite_holds_nothing_and_runs_the_block(tmp_path):
    ran = []
    with advisory_lock(make_engine(f"sqlite:///{tmp_path}/store.db"), "publish"):
        ran.append(True)
    assert ran == [True]
