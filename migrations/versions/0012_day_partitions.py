"""day partitions (PostgreSQL): decisions, outcomes and feedback partitioned by range of the request id, whose
gateway ids begin with the time they were made, so that retention drops a day whole (store.partitions). Each
table is rebuilt: a new partitioned table with the old one's columns, checks, key and indexes, the rows copied
into its default partition; the foreign keys join each partition to the same day's decisions. SQLite is left as it is.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07
"""

from alembic import op

from regret_gateway.store.partitions import TABLES, foreign_keys

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

def _scalars(sql: str, **params) -> list:
    import sqlalchemy as sa

    return list(op.get_bind().execute(sa.text(sql), params).scalars())


def _rebuild(partition: bool) -> None:
    """Rebuild the three tables as partitioned (with a default partition) or as plain tables, keeping every row
    and every index, check and key under its name; the foreign keys of outcomes and feedback join the partitions
    (store.partitions.foreign_keys) or the tables."""
    indexes = {
        t: _scalars("SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "WHERE i.indrelid = to_regclass(:t) AND NOT i.indisprimary ORDER BY c.relname", t=t)
        for t in TABLES
    }  # fmt: skip
    keys = {
        t: _scalars("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = to_regclass(:t) AND contype = 'p'", t=t)[0]
        for t in TABLES
    }  # fmt: skip
    for t in TABLES:
        op.execute(f"ALTER TABLE {t} RENAME TO {t}_old")
        op.execute(f"ALTER INDEX {t}_pkey RENAME TO {t}_old_pkey")
        for sql in indexes[t]:
            op.execute(f"DROP INDEX {sql.split()[2]}")  # CREATE [UNIQUE] INDEX name ON ...
        by = " PARTITION BY RANGE (request_id)" if partition else ""
        op.execute(f"CREATE TABLE {t} (LIKE {t}_old INCLUDING DEFAULTS INCLUDING CONSTRAINTS){by}")
        op.execute(f"ALTER TABLE {t} ADD CONSTRAINT {t}_pkey {keys[t]}")
        if partition:
            op.execute(f"CREATE TABLE {t}_default PARTITION OF {t} DEFAULT")
        op.execute(f"INSERT INTO {t} SELECT * FROM {t}_old")
        for sql in indexes[t]:
            op.execute(sql.replace(" ON ONLY ", " ON "))  # read before the rename: it names the new table
    for t in reversed(TABLES):
        op.execute(f"DROP TABLE {t}_old CASCADE")
    if partition:  # each partition's key to the same partition of decisions
        for sql in foreign_keys("default"):
            op.execute(sql)
        return
    for t in TABLES[1:]:
        op.execute(f"ALTER TABLE {t} ADD CONSTRAINT {t}_request_id_fkey FOREIGN KEY (request_id) "
                   "REFERENCES decisions (request_id) ON DELETE CASCADE")  # fmt: skip


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild(partition=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _rebuild(partition=False)
