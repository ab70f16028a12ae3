"""The gateway's batched writer: requests never wait for the database, and no decision is lost.

It writes routing decisions (with their outcomes) and the gateway's own quality scores (the LLM judge's
:class:`FeedbackRecord`), in the order they were submitted. ``submit`` puts a record into a bounded in-memory queue and returns at once (it never raises and never
blocks on the database). A background thread takes batches (``batch_size`` records, or whatever arrived
within ``flush_interval_s``) and writes them in one transaction. When the database is unavailable it
retries with exponential backoff; if the outage lasts longer than ``spill_after_s`` the batch is appended
to a local spill file (JSON lines) and the thread goes on draining the queue, so memory stays bounded by
``queue_size``. A full queue also spills (from the caller, one line). Once a probe succeeds, the spill
files are replayed in chunks. Writes are idempotent on the request id, so a batch that is replayed after
a write whose commit was in doubt is never stored twice.

Counters (``stats()``): queued, written (records committed), new_rows, duplicates, spilled, replayed,
retries, outages, refused, dropped (a record is dropped only if it can be neither written nor spilled, e.g. the
disk is full; it is logged) and max_queue_depth. A record the store refuses (e.g. an embedding whose size
contradicts the stored ones) is written aside to ``refused.jsonl`` in the spill folder, with a log line.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import DataError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from regret_gateway.store.records import DecisionRecord, FeedbackRecord, StoreInputError, UnknownRequestError
from regret_gateway.store.spill import append_records, read_records, spill_files
from regret_gateway.store.writes import record_decisions, record_feedback, record_outcomes

Record = DecisionRecord | FeedbackRecord

log = logging.getLogger(__name__)

# What the store refuses for a record's content (a constraint, a value the column cannot hold, a value the
# driver cannot send): the batch is written record by record and only the refused ones are set aside.
# Anything else from the database is an outage: retried, then spilled.
REFUSED = (IntegrityError, DataError, StoreInputError, ValueError)

_STOP = object()
_KNOWN = 100_000  # ids of the decisions this writer committed last, whose outcome is then written alone


@dataclass(frozen=True)
class WriterStats:
    """The writer's counters since it started (``GET /regret/stats`` shows them as ``writer_*``)."""

    queued: int  # records accepted into the queue
    written: int  # records written (new or already stored)
    new_rows: int
    duplicates: int  # records the store already held (a replay after a commit in doubt)
    spilled: int  # records spilled to disk during an outage
    replayed: int  # spilled records written back
    retries: int
    outages: int
    dropped: int  # records lost (spill disk unwritable)
    refused: int  # records the store refused as invalid (kept in a refused file)
    max_queue_depth: int
    queue_depth: int  # now
    pending_spill_files: int  # now
    database_down: bool  # now


class BatchedWriter:
    def __init__(
        self,
        engine: Engine,
        spill_dir: str | Path,
        *,
        queue_size: int = 10_000,
        batch_size: int = 500,
        flush_interval_s: float = 1.0,
        retry_initial_s: float = 0.05,
        retry_max_s: float = 5.0,
        spill_after_s: float = 2.0,
        replay_chunk: int = 500,
    ):
        if queue_size < 1 or batch_size < 1 or replay_chunk < 1:
            raise ValueError("`queue_size`, `batch_size` and `replay_chunk` must be >= 1")
        if flush_interval_s <= 0 or retry_initial_s <= 0 or retry_max_s < retry_initial_s or spill_after_s < 0:
            raise ValueError("intervals must be > 0, `retry_max_s` >= `retry_initial_s`, `spill_after_s` >= 0")
        self.engine = engine
        self.spill_dir = Path(spill_dir)
        self.spill_dir.mkdir(parents=True, exist_ok=True)
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self.spill_after_s = spill_after_s
        self.replay_chunk = replay_chunk
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        pid = os.getpid()
        self._spill_file = self.spill_dir / f"spill-{pid}.jsonl"  # written by the writer thread
        self._overflow_file = self.spill_dir / f"overflow-{pid}.jsonl"  # written by callers when the queue is full
        self._spill_lock = threading.Lock()
        self._overflow_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._stats = {
            k: 0
            for k in (
                "queued",
                "written",
                "new_rows",
                "duplicates",
                "spilled",
                "replayed",
                "retries",
                "outages",
                "dropped",
                "refused",
                "max_queue_depth",
            )
        }
        self._committed: dict[str, None] = {}  # insertion-ordered, at most _KNOWN
        self._down_since: float | None = None
        self._backoff = retry_initial_s
        self._next_probe = 0.0
        self._busy = False
        self._thread: threading.Thread | None = None

    # ---- caller side -------------------------------------------------------------------------------
    def start(self) -> "BatchedWriter":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="regret-gateway-writer", daemon=True)
            self._thread.start()
        return self

    def submit(self, record: Record) -> None:
        """Queue one decision (with its outcome) or score. Never blocks on the database; never raises."""
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self._append(self._overflow_file, self._overflow_lock, [record])
            return
        with self._stats_lock:
            self._stats["queued"] += 1
            depth = self._queue.qsize()
            if depth > self._stats["max_queue_depth"]:
                self._stats["max_queue_depth"] = depth

    def queue_depth(self) -> int:
        """Records waiting in the queue now."""
        return self._queue.qsize()

    def stats(self) -> WriterStats:
        with self._stats_lock:
            counts = dict(self._stats)
        return WriterStats(**counts, queue_depth=self._queue.qsize(), pending_spill_files=len(spill_files(self.spill_dir)),
                           database_down=self._down_since is not None)  # fmt: skip

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until the queue is empty, nothing is in flight and every spill file has been replayed.
        False if that did not happen within ``timeout`` (e.g. the database is still down)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0 and not self._busy and not spill_files(self.spill_dir):
                return True
            time.sleep(0.02)
        return False

    def close(self, timeout: float = 30.0) -> None:
        """Stop after writing (or spilling) everything queued. Spilled records stay on disk and are
        replayed by the next writer that starts on the same spill folder."""
        if self._thread is None:
            return
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._queue.put(_STOP, timeout=0.1)
                break
            except queue.Full:
                if time.monotonic() > deadline:
                    break
        self._thread.join(max(0.0, deadline - time.monotonic()))
        self._thread = None

    # ---- writer thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._replay()  # what an earlier process left behind
        except Exception:  # never let the thread die: the next probe replays again
            log.exception("regret-gateway writer: replay at start failed")
        stopping = False
        while not stopping:
            batch, stopping = self._take_batch()
            self._busy = True
            try:
                if batch:
                    self._deliver(batch)
                if spill_files(self.spill_dir) and time.monotonic() >= self._next_probe:
                    self._replay()
            except Exception:  # never let the thread die: log and keep going
                log.exception("regret-gateway writer: unexpected error")
            finally:
                for _ in range(len(batch) + stopping):
                    self._queue.task_done()
                self._busy = False
        # drain whatever is still queued (close() after a burst)
        rest = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                rest.append(item)
        if rest:
            self._deliver(rest, final=True)
        for _ in range(len(rest)):
            self._queue.task_done()

    def _take_batch(self) -> tuple[list[Record], bool]:
        batch: list[Record] = []
        wait = self.flush_interval_s
        if spill_files(self.spill_dir):
            wait = max(0.01, min(wait, self._next_probe - time.monotonic()))
        deadline = time.monotonic() + wait
        while len(batch) < self.batch_size:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=max(remaining, 0.0)) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(item)
        return batch, False

    def _write(self, records: list[Record], *, alone: bool = False) -> int:
        """One transaction: the decisions first, then the scores (a score may be for a decision of the batch).
        A decision this writer committed already is not sent again with its outcome: the outcome goes alone
        (each request written once, its 1.5 KB embedding included). ``alone``: a record written on its own
        after a refused batch, sent whole."""
        decisions = [r for r in records if isinstance(r, DecisionRecord)]
        scores = [r for r in records if isinstance(r, FeedbackRecord)]
        known = [] if alone else [r for r in decisions if r.outcome is not None and r.request_id in self._committed]
        if known:
            decisions = [r for r in decisions if r.outcome is None or r.request_id not in self._committed]
        with Session(self.engine) as session, session.begin():
            new_rows = record_decisions(session, decisions)
            record_outcomes(session, [r.outcome for r in known if r.outcome is not None], decisions_known=True)
            new_rows += record_feedback(session, scores)
        for r in decisions:
            self._committed[r.request_id] = None
        while len(self._committed) > _KNOWN:
            del self._committed[next(iter(self._committed))]
        return new_rows

    def _mark_up(self) -> None:
        if self._down_since is not None:
            log.warning("regret-gateway writer: database reachable again after %.1fs", time.monotonic() - self._down_since)
        self._down_since = None
        self._backoff = self.retry_initial_s
        self._next_probe = 0.0

    def _mark_down(self, exc: Exception) -> None:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
            with self._stats_lock:
                self._stats["outages"] += 1
            log.warning("regret-gateway writer: database unavailable (%s); retrying", type(exc).__name__)
        self._next_probe = now + self._backoff
        self._backoff = min(self._backoff * 2, self.retry_max_s)

    def _count_written(self, n: int, new_rows: int, replayed: bool) -> None:
        with self._stats_lock:
            self._stats["written"] += n
            self._stats["new_rows"] += new_rows
            self._stats["duplicates"] += n - new_rows
            if replayed:
                self._stats["replayed"] += n

    def _deliver(self, batch: list[Record], final: bool = False) -> None:
        """Write one batch: retry while the outage is young, spill once it lasts (or at shutdown)."""
        while True:
            if self._down_since is not None and time.monotonic() < self._next_probe:
                if final or time.monotonic() - self._down_since >= self.spill_after_s:
                    self._append(self._spill_file, self._spill_lock, batch)
                    return
                time.sleep(max(0.0, self._next_probe - time.monotonic()))
            try:
                new_rows = self._write(batch)
            except REFUSED:
                self._write_one_by_one(batch, live=True)
                self._mark_up()
                return
            except SQLAlchemyError as exc:
                with self._stats_lock:
                    self._stats["retries"] += 1
                self._mark_down(exc)
                continue
            self._count_written(len(batch), new_rows, replayed=False)
            self._mark_up()
            return

    def _write_one_by_one(self, batch: list[Record], live: bool = False) -> None:
        """A constraint refused the batch: keep every good record, spill the refused one(s) aside. A score
        whose decision is still in a spill file (a recent outage) is spilled after it instead, to be
        replayed in order."""
        for record in batch:
            try:
                self._count_written(1, self._write([record], alone=True), replayed=False)
            except UnknownRequestError:
                if live and isinstance(record, FeedbackRecord) and spill_files(self.spill_dir):
                    self._append(self._spill_file, self._spill_lock, [record])
                    continue
                self._refuse(record, "its request has no decision")
            except REFUSED as exc:
                self._refuse(record, str(exc))

    def _refuse(self, record: Record, why: str) -> None:
        log.error("regret-gateway writer: request %r refused by the store (%s); kept in %s", record.request_id, why,
                  self.spill_dir / "refused.jsonl")  # fmt: skip
        self._append(self.spill_dir / "refused.jsonl", self._spill_lock, [record], counter="refused")

    def _append(self, path: Path, lock: threading.Lock, records: list[Record], counter: str = "spilled") -> None:
        kept = append_records(path, lock, records)
        with self._stats_lock:
            self._stats[counter if kept else "dropped"] += len(records)

    def _replay(self) -> None:
        """Write every spill file back in chunks; a file is deleted only once all of it is committed."""
        for path in spill_files(self.spill_dir):
            if path.name.endswith(".jsonl"):  # freeze it: new spills go to a fresh file
                lock = self._overflow_lock if path.name.startswith("overflow") else self._spill_lock
                frozen = path.with_name(f"{path.name}.replaying-{time.time_ns()}")
                with lock:
                    if not path.exists():
                        continue
                    path.rename(frozen)
                path = frozen
            if not self._replay_file(path):
                return
            path.unlink()

    def _replay_file(self, path: Path) -> bool:
        chunk: list[Record] = []
        for record in read_records(path):
            chunk.append(record)
            if len(chunk) >= self.replay_chunk:
                if not self._replay_chunk(chunk):
                    return False
                chunk = []
        return not chunk or self._replay_chunk(chunk)

    def _replay_chunk(self, chunk: list[Record]) -> bool:
        try:
            new_rows = self._write(chunk)
        except REFUSED:
            self._write_one_by_one(chunk)
            return True
        except SQLAlchemyError as exc:
            self._mark_down(exc)
            return False
        self._count_written(len(chunk), new_rows, replayed=True)
        self._mark_up()
        return True
