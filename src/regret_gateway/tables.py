"""Tabular files by suffix, in one place: which formats exist, how each is read and written.

Readers: ``read_rows`` (list of dicts; CSV and JSON lines need nothing beyond the standard library,
Parquet and pickles need pandas/pyarrow, the `formats` extra) and ``read_frame`` (a pandas DataFrame).
Writer: ``write_columns`` (Parquet or CSV). ``.gz`` is transparent for CSV and JSON lines.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

FORMATS = {
    ".csv": "csv", ".csv.gz": "csv", ".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".ndjson": "jsonl",
    ".json": "json", ".parquet": "parquet", ".pkl": "pickle", ".pickle": "pickle",
}  # fmt: skip
SUFFIXES = tuple(FORMATS)


def table_format(path: str | Path, allowed: tuple[str, ...] | None = None) -> str:
    """'csv', 'jsonl', 'json', 'parquet' or 'pickle' from the file name; raises ValueError otherwise."""
    name = Path(path).name.lower()
    for suffix in sorted(FORMATS, key=len, reverse=True):
        if name.endswith(suffix) and (allowed is None or FORMATS[suffix] in allowed):
            return FORMATS[suffix]
    kinds = [s for s, f in FORMATS.items() if allowed is None or f in allowed]
    raise ValueError(f"unsupported file type: {Path(path).name} (supported: {', '.join(kinds)})")


def open_text(path: str | Path, mode: str = "rt") -> IO[str]:
    """``open`` for text, through gzip when the name ends in .gz."""
    newline = "" if "w" in mode else None
    if str(path).lower().endswith(".gz"):
        return io.TextIOWrapper(gzip.GzipFile(filename=str(path), mode=mode.replace("t", "")), encoding="utf-8", newline=newline)
    return open(path, mode, encoding="utf-8", newline=newline)


def pandas(what: str):
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError(
            f"reading {what} needs pandas (and pyarrow for Parquet): pip install 'regret-gateway[formats]'"
        ) from None
    return pd


def read_rows(path: str | Path) -> list[dict]:
    """Every row of a table file as a dict (CSV values are strings)."""
    path = Path(path)
    kind = table_format(path)
    if kind == "csv":
        with open(path, "rb") as raw:
            data = gzip.decompress(raw.read()) if path.name.lower().endswith(".gz") else raw.read()
        return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    if kind == "jsonl":
        with open_text(path) as fh:
            return [json.loads(line) for line in fh if line.strip()]
    if kind == "json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list):
            raise ValueError(f"{path}: a JSON table must be a list of rows")
        return data
    frame = read_frame(path)
    if not hasattr(frame, "to_dict"):
        raise ValueError(f"{path}: expected a pandas DataFrame, got {type(frame).__name__}")
    return frame.to_dict(orient="records")


def read_frame(path: str | Path) -> "pd.DataFrame":
    """A table file as a pandas DataFrame."""
    path = Path(path)
    kind = table_format(path)
    pd = pandas(path.name)
    if kind == "csv":
        return pd.read_csv(path)
    if kind == "jsonl":
        return pd.read_json(path, lines=True)
    if kind == "json":
        return pd.DataFrame(read_rows(path))
    return pd.read_parquet(path) if kind == "parquet" else pd.read_pickle(path)


def write_columns(path: str | Path, columns: "dict[str, list | np.ndarray]") -> Path:
    """Write equal-length columns (lists or numpy arrays) to ``.parquet`` (needs pyarrow), ``.csv`` or ``.csv.gz``."""
    path = Path(path)
    kind = table_format(path, allowed=("csv", "parquet"))
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError("Parquet needs pyarrow: pip install 'regret-gateway[formats]' (or use .csv)") from None
        pq.write_table(pa.table(columns), path)
        return path
    with open_text(path, "wt") as fh:
        writer = csv.writer(fh)
        writer.writerow(list(columns))
        writer.writerows(zip(*(c.tolist() if hasattr(c, "tolist") else c for c in columns.values())))
    return path
