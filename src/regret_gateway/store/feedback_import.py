"""``regret-gateway feedback import``: quality scores in bulk from a CSV (header ``request_id,score[,source]``)
or JSON-lines file, streamed in chunks (memory bounded by the chunk, not the file).

The file is written in one transaction. By default it is all or nothing: a row that is not a valid score
(reported by its line, every one of them) or a request id the store does not hold refuses the whole file
and changes nothing. ``skip_invalid`` imports the valid rows and reports the others; ``skip_unknown``
imports the known request ids and counts the unknown ones.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from regret_gateway.store.records import FeedbackRecord, StoreInputError
from regret_gateway.store.writes import record_feedback, unknown_request_ids
from regret_gateway.tables import open_text, table_format

CHUNK_ROWS = 5000  # rows read, checked and written at a time
EXAMPLES = 5  # unknown request ids named in the report


def count_lines(path: str | Path) -> int:
    """Lines of a (possibly gzipped) text file, 0 for a missing one: the length of the import's progress bar."""
    try:
        with open_text(path) as fh:
            return sum(1 for _ in fh)
    except (OSError, UnicodeDecodeError):
        return 0


def iter_feedback_file(path: str | Path, *, default_source: str = "import") -> Iterator[tuple[int, FeedbackRecord | str]]:
    """(line, record) for each valid row of the file, (line, why) for each invalid one, in file order."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"feedback file not found: {path}")
    kind = table_format(path, allowed=("csv", "jsonl", "json"))
    with open_text(path) as fh:
        if kind == "csv":
            reader = csv.DictReader(fh)
            if not reader.fieldnames or not {"request_id", "score"} <= set(reader.fieldnames):
                raise StoreInputError(f"{path}: the CSV header must have request_id and score, got {reader.fieldnames}")
            rows: Iterator[tuple[int, object]] = ((reader.line_num, row) for row in reader)
        else:  # JSON lines (a .json feedback file holds one object per line too)
            rows = ((i, line) for i, line in enumerate(fh, 1) if line.strip())
        for line, row in rows:
            if isinstance(row, str):
                try:
                    row = json.loads(row)
                except (ValueError, RecursionError) as exc:
                    yield line, f"not valid JSON ({exc})"
                    continue
            if not isinstance(row, dict):
                yield line, f"a row must be an object with request_id and score, got {type(row).__name__}"
                continue
            try:
                if "request_id" not in row or "score" not in row:
                    raise ValueError("a row needs request_id and score")
                yield (
                    line,
                    FeedbackRecord(str(row["request_id"]), float(row["score"]), source=row.get("source") or default_source),
                )
            except (TypeError, ValueError) as exc:
                yield line, str(exc)


@dataclass
class FeedbackImport:
    """What an import did: scores written (0 when it was refused), rows refused and why."""

    imported: int = 0
    rows: int = 0
    invalid: int = 0
    unknown: int = 0
    unknown_examples: list[str] = field(default_factory=list)
    committed: bool = False


def import_feedback(
    engine: Engine,
    path: str | Path,
    *,
    default_source: str = "import",
    skip_unknown: bool = False,
    skip_invalid: bool = False,
    on_invalid: Callable[[int, str], None] | None = None,
    on_chunk: Callable[[int], None] | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> FeedbackImport:
    """Import ``path``'s scores (see the module doc). ``on_invalid(line, why)`` is told of every invalid row as
    it is read; ``on_chunk(rows)`` after every chunk. Raises FileNotFoundError / StoreInputError for a file
    it cannot read at all, SQLAlchemyError when the store fails."""
    result = FeedbackImport()
    rows = iter_feedback_file(path, default_source=default_source)
    with Session(engine) as session:
        session.begin()
        try:
            while chunk := list(islice(rows, chunk_rows)):
                result.rows += len(chunk)
                records = []
                for line, item in chunk:
                    if isinstance(item, FeedbackRecord):
                        records.append(item)
                        continue
                    result.invalid += 1
                    if on_invalid is not None:
                        on_invalid(line, item)
                unknown = set(unknown_request_ids(session, [r.request_id for r in records]))
                result.unknown += len(unknown)
                result.unknown_examples.extend(sorted(unknown)[: EXAMPLES - len(result.unknown_examples)])
                if not ((result.invalid and not skip_invalid) or (result.unknown and not skip_unknown)):
                    result.imported += record_feedback(session, [r for r in records if r.request_id not in unknown])
                # else refused already: read on to report every bad row and unknown id, write nothing more
                if on_chunk is not None:
                    on_chunk(len(chunk))
            if (result.invalid and not skip_invalid) or (result.unknown and not skip_unknown):
                session.rollback()
                result.imported = 0
            else:
                session.commit()
                result.committed = True
        except BaseException:
            session.rollback()
            raise
    return result
