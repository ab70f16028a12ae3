"""PostgreSQL's binary COPY format: how the store hands a batch of rows to PostgreSQL in one round trip.

Each column is sent in the type's binary form, taken from the ORM column's type (the migrations create the
same types; a test compares them): text as UTF-8, ``double precision`` and ``integer`` big-endian,
``timestamptz`` as microseconds since 2000-01-01 UTC, ``bytea`` as its bytes, ``json`` as its text, ``boolean`` as one byte. No
per-row statement, no hex text for the 1.5 KB embeddings for the server to parse.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, LargeBinary, String, Table

HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)  # signature, flags, header extension length
TRAILER = struct.pack(">h", -1)
_NULL = struct.pack(">i", -1)
_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
_DOUBLE = struct.Struct(">id")
_INT = struct.Struct(">ii")
_BIGINT = struct.Struct(">iq")


def _text(value: Any) -> bytes:
    data = str(value).encode("utf-8")
    return struct.pack(">i", len(data)) + data


def _bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


def _double(value: Any) -> bytes:
    return _DOUBLE.pack(8, float(value))


def _int(value: Any) -> bytes:
    return _INT.pack(4, int(value))


def _timestamp(value: datetime) -> bytes:
    if value.tzinfo is None:  # the store's timestamps are UTC
        value = value.replace(tzinfo=timezone.utc)
    delta = value - _EPOCH
    return _BIGINT.pack(8, (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


def _json(value: Any) -> bytes:
    return _text(json.dumps(value, separators=(",", ":")))


def _bool(value: Any) -> bytes:
    return b"\x00\x00\x00\x01" + (b"\x01" if value else b"\x00")


def _encoder(column_type: Any) -> Callable[[Any], bytes]:
    if isinstance(column_type, Boolean):
        return _bool
    if isinstance(column_type, DateTime):
        return _timestamp
    if isinstance(column_type, Float):
        return _double
    if isinstance(column_type, Integer):
        return _int
    if isinstance(column_type, LargeBinary):
        return _bytes
    if isinstance(column_type, JSON):
        return _json
    if isinstance(column_type, String):  # Text too
        return _text
    raise NotImplementedError(f"no binary COPY encoding for {column_type!r}")


def encode(table: Table, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> bytes:
    """The COPY ``FORMAT binary`` stream of ``rows`` (dicts keyed by column name) for ``columns`` of ``table``.
    A value its column's type cannot hold raises ValueError (the store refuses that record)."""
    encoders = [(name, _encoder(table.c[name].type)) for name in columns]
    count = struct.pack(">h", len(encoders))
    parts = [HEADER]
    try:
        for row in rows:
            parts.append(count)
            for name, encode_value in encoders:
                value = row.get(name)
                parts.append(_NULL if value is None else encode_value(value))
    except (struct.error, OverflowError, TypeError) as exc:
        raise ValueError(f"a value cannot be sent as its column's type: {exc}") from exc
    parts.append(TRAILER)
    return b"".join(parts)
