"""PostgreSQL's binary COPY: every column type the store sends arrives as the value it was, NULL as NULL,
and a value its column cannot hold is refused before anything is sent."""

import io
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import JSON, Boolean, Column, DateTime, Float, Integer, LargeBinary, MetaData, Numeric, String, Table, Text, text

from regret_gateway.store import pg_copy
from tests.store.conftest import _pg_admin

ROWS = [
    {"name": "zürich ✓", "note": "a longer\ntext", "score": -0.125, "count": 2_000_000_000, "at": datetime(2026, 12, 2, 3, 4, 5, 678_901, tzinfo=timezone.utc),
     "blob": bytes(range(256)), "meta": {"k": [1, 2.5, None], "s": "é"}, "flag": True},
    {"name": "", "note": None, "score": 1e300, "count": -7, "at": datetime(1999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-5))),
     "blob": b"", "meta": None, "flag": False},
    {"name": "naive", "note": "x", "score": 0.0, "count": 0, "at": datetime(2000, 1, 1), "blob": None, "meta": [], "flag": None},
]  # fmt: skip
COLUMNS = tuple(ROWS[0])


def _table(schema: str) -> Table:
    return Table("copied", MetaData(schema=schema), Column("name", String(64)), Column("note", Text), Column("score", Float),
                 Column("count", Integer), Column("at", DateTime(timezone=True)), Column("blob", LargeBinary),
                 Column("meta", JSON), Column("flag", Boolean))  # fmt: skip


def test_every_column_type_round_trips_through_binary_copy():
    admin = _pg_admin()
    schema = f"rg_copy_{uuid.uuid4().hex[:10]}"
    table = _table(schema)
    try:
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
            table.create(conn)
        raw = admin.raw_connection()
        try:
            with raw.cursor() as cursor:
                cursor.copy_expert(f"COPY {schema}.copied ({', '.join(COLUMNS)}) FROM STDIN WITH (FORMAT binary)",
                                   io.BytesIO(pg_copy.encode(table, COLUMNS, ROWS)))  # fmt: skip
            raw.commit()
        finally:
            raw.close()
        with admin.connect() as conn:
            back = [dict(r._mapping) for r in conn.execute(table.select())]
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
    assert len(back) == len(ROWS)
    for sent, got in zip(ROWS, back):
        expected = dict(sent)
        if expected["at"].tzinfo is None:  # the store's timestamps are UTC
            expected["at"] = expected["at"].replace(tzinfo=timezone.utc)
        got["blob"] = None if got["blob"] is None else bytes(got["blob"])
        assert got == expected


def test_a_value_its_column_cannot_hold_is_refused_before_anything_is_sent():
    table = _table("any")
    with pytest.raises(ValueError, match="cannot be sent as its column's type"):
        pg_copy.encode(table, ("count",), [{"count": 2**40}])  # integer is 32 bits
    with pytest.raises(NotImplementedError, match="no binary COPY encoding"):
        pg_copy.encode(Table("t", MetaData(), Column("x", Numeric())), ("x",), [{"x": 1}])
