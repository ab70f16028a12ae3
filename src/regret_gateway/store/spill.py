"""The writer's spill files: JSON lines of records that could not be written yet (the database down, or the
queue full), appended with ``fsync`` and read back for replay. A file is named ``<kind>-<pid>.jsonl``: a
live worker's own file is left to it, a gone process's is replayed by whoever finds it."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from regret_gateway.store.records import DecisionRecord, FeedbackRecord, record_from_json

log = logging.getLogger("regret_gateway.store.writer")


def append_records(path: Path, lock: threading.Lock, records: list[DecisionRecord | FeedbackRecord]) -> bool:
    """Append ``records`` to ``path`` as JSON lines, on disk before it returns. False (with a log line) where
    the disk refuses them: they are lost."""
    lines = "".join(json.dumps(r.to_json(), separators=(",", ":")) + "\n" for r in records)
    try:
        with lock, open(path, "a", encoding="utf-8") as fh:
            fh.write(lines)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        log.exception("regret-gateway writer: could not spill %d records to %s; they are lost", len(records), path)
        return False
    return True


def spill_files(spill_dir: Path) -> list[Path]:
    """Spill files to replay: this process's, those being replayed, and those of processes that are gone
    (never ``refused.jsonl``: what the store refused is kept aside, not retried)."""
    files = []
    for path in sorted(spill_dir.glob("*.jsonl*")):
        if path.name.startswith("refused"):
            continue
        pid = path.name.split("-")[1].split(".")[0] if "-" in path.name else ""
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue  # a live worker's own file
        files.append(path)
    return files


def read_records(path: Path) -> Iterator[DecisionRecord | FeedbackRecord]:
    """The records of a spill file in order; a line that is not one is skipped with a log line, and a file
    another worker replayed meanwhile is empty."""
    try:
        fh = open(path, encoding="utf-8")
    except FileNotFoundError:
        return
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = record_from_json(json.loads(line))
            except (ValueError, TypeError, KeyError):
                log.error("regret-gateway writer: %s line %d is not a decision or score record; skipped", path, lineno)
                continue
            yield record


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
