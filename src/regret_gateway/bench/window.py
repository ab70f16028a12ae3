"""Retrain's window read at a platform's scale (``regret-gateway bench window``): a store filled with N
simulated decisions over 30 days (a share of them scored, :func:`~regret_gateway.bench.report.fill_store`),
exported as Parquet day parts, then the same 30-day training set read by the store's reader and by the parts'
(DuckDB), each in a fresh process with its peak memory, side by side in one run."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy.orm import Session

from regret_gateway.bench.own_process import in_own_process, peak_mb
from regret_gateway.bench.report import DAYS, MODELS, UNTIL
from regret_gateway.store.engine import make_engine
from regret_gateway.store.retention import table_sizes

READERS = ("store", "parts")


@dataclass(frozen=True)
class Read:
    """One reader's read of the window: seconds, its process's peak and starting memory, what it kept."""

    seconds: float
    peak_mb: float
    base_mb: float
    rows: int  # the training set's rows (the sample past MAX_ROWS)
    scored: int  # the window's scored decisions, before the sample
    digest: str  # of the kept request ids and embeddings: the same training set or not


@dataclass(frozen=True)
class WindowRun:
    decisions: int
    scored_share: float
    store_bytes: int  # the store's tables and indexes on disk
    parts_bytes: dict[str, int]  # bytes of each kind of day part
    export_seconds: float
    reads: dict[str, Read]


def _read(reader: str, store_url: str, parts_url: str) -> tuple[float, float | None, int, int, str]:
    """(seconds, memory before, rows, scored, digest) of one 30-day training-set read by ``reader``."""
    from regret_gateway.retrain.window import training_set
    from regret_gateway.store.parts import PartsRows

    base = peak_mb()
    engine = make_engine(store_url)
    started = time.perf_counter()
    with Session(engine) as session:
        source = session if reader == "store" else PartsRows(parts_url)
        ts = training_set(source, model_names=MODELS, since=UNTIL - timedelta(days=DAYS), until=UNTIL)
    seconds = time.perf_counter() - started
    engine.dispose()
    digest = hashlib.sha256("\n".join(ts.request_ids).encode())
    if ts.logged is not None:
        digest.update(ts.logged.X.tobytes())
    return seconds, base, ts.n_rows, ts.sampled_from or ts.n_rows, digest.hexdigest()[:12]


def _folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.parquet"))


def measure_window(store_url: str, parts_dir: Path, decisions: int, scored_share: float, echo=None) -> WindowRun:
    """Export the filled store at ``store_url`` into ``parts_dir``, then time each reader in its own process."""
    from regret_gateway.store.parts import KINDS, export_days

    engine = make_engine(store_url)
    store_bytes = sum(s.bytes or 0 for s in table_sizes(engine))
    started = time.perf_counter()
    with Session(engine) as session:
        export_days(session, str(parts_dir), until=UNTIL + timedelta(days=1))  # the window's last scores come after it
    export_seconds = time.perf_counter() - started
    engine.dispose()
    reads = {}
    for reader in READERS:
        (seconds, base, rows, scored, digest), peak = in_own_process(_read, reader, store_url, str(parts_dir), timeout=7200)
        reads[reader] = Read(seconds, float("nan") if peak is None else peak, float("nan") if base is None else base,
                             rows, scored, digest)  # fmt: skip
        if echo is not None:
            echo(f"  {reader} reader: {seconds:.1f} s, peak {reads[reader].peak_mb:,.0f} MB, {rows:,} rows")
    return WindowRun(decisions, scored_share, store_bytes, {k: _folder_bytes(parts_dir / k) for k in KINDS},
                     export_seconds, reads)  # fmt: skip


def window_table(runs: list[WindowRun]) -> str:
    """Markdown: per store, bytes a decision, the export, and each reader's seconds and peak memory side by side."""
    lines = ["| decisions | scored | store B/decision | parts B/decision (decisions + feedback + embeddings) | export s | "
             "store read s | parts read s | store / parts | store peak MB | parts peak MB | same training set |",
             "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for r in runs:
        s, p = r.reads["store"], r.reads["parts"]
        kinds = " + ".join(f"{b / r.decisions:,.0f}" for b in r.parts_bytes.values())
        lines.append(f"| {r.decisions:,} | {s.scored:,} | {r.store_bytes / r.decisions:,.0f} | "
                     f"{sum(r.parts_bytes.values()) / r.decisions:,.0f} ({kinds}) | {r.export_seconds:.1f} | "
                     f"{s.seconds:.1f} | {p.seconds:.1f} | {s.seconds / p.seconds:.1f}x | {s.peak_mb:,.0f} | "
                     f"{p.peak_mb:,.0f} | {'yes' if s.digest == p.digest else 'NO'} |")  # fmt: skip
    return "\n".join(lines)
