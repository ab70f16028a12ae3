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

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.bench.own_process import in_own_process, peak_mb
from regret_gateway.bench.report import DAYS, MODELS, UNTIL
from regret_gateway.store.engine import make_engine
from regret_gateway.store.retention import drop_embeddings, table_sizes

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
    dropped_bytes: int  # the same once every unscored decision's embedding was dropped (and the file compacted)
    drop_seconds: float  # `db prune`'s drop of those embeddings
    parts_bytes: dict[str, int]  # bytes of each kind of day part
    export_seconds: float
    reads: dict[str, Read]


def _read(reader: str, store_url: str, parts_url: str) -> tuple[float, float | None, int, int, str]:
    """(seconds, memory before, rows, scored, digest) of one 30-day training-set read by ``reader``, as retrain
    reads it (sampled to :data:`~regret_gateway.sampling.MAX_ROWS`)."""
    from regret_gateway.sampling import MAX_ROWS
    from regret_gateway.store.parts import PartsRows
    from regret_gateway.trainset.window import training_set

    base = peak_mb()
    started = time.perf_counter()
    engine = make_engine(store_url)
    with Session(engine) as session:
        source = session if reader == "store" else PartsRows(parts_url)
        ts = training_set(source, model_names=MODELS, since=UNTIL - timedelta(days=DAYS), until=UNTIL, max_rows=MAX_ROWS)
    engine.dispose()
    seconds = time.perf_counter() - started
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
    engine = make_engine(store_url)
    started = time.perf_counter()
    drop_embeddings(engine, UNTIL + timedelta(days=1))  # the score window over for every decision
    drop_seconds = time.perf_counter() - started
    if engine.dialect.name == "sqlite":  # the freed pages out of the file (a live store reuses them instead)
        with engine.connect() as connection:
            connection.exec_driver_sql("VACUUM")
    dropped_bytes = sum(s.bytes or 0 for s in table_sizes(engine))
    engine.dispose()
    if echo is not None:
        echo(f"  unscored embeddings dropped in {drop_seconds:.1f} s: {dropped_bytes / decisions:,.0f} B a decision")
    return WindowRun(decisions, scored_share, store_bytes, dropped_bytes, drop_seconds,
                     {k: _folder_bytes(parts_dir / k) for k in KINDS}, export_seconds, reads)  # fmt: skip


def steady_bytes(full: float, dropped: float, window_days: float = 7.0, retention_days: float = 90.0) -> float:
    """Bytes a decision of a store at steady state: the decisions of the last ``window_days`` of ``retention_days``
    still hold their embedding (``full`` bytes a decision), the older ones only where scored (``dropped``)."""
    return (window_days * full + (retention_days - window_days) * dropped) / retention_days


def window_table(runs: list[WindowRun]) -> str:
    """Markdown: per store, bytes a decision (every embedding; the unscored ones dropped; at steady state with the
    defaults' 7-day score window of 90 days kept), the export, and each reader's seconds and peak memory."""
    lines = ["| decisions | scored | store B/decision | unscored embeddings dropped | steady state (7 d of 90) | drop s | "
             "parts B/decision (decisions + feedback + embeddings) | export s | "
             "store read s | parts read s | store / parts | store peak MB | parts peak MB | same training set |",
             "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for r in runs:
        s, p = r.reads["store"], r.reads["parts"]
        kinds = " + ".join(f"{b / r.decisions:,.0f}" for b in r.parts_bytes.values())
        full, dropped = r.store_bytes / r.decisions, r.dropped_bytes / r.decisions
        lines.append(f"| {r.decisions:,} | {s.scored:,} | {full:,.0f} | {dropped:,.0f} | {steady_bytes(full, dropped):,.0f} | "
                     f"{r.drop_seconds:.1f} | {sum(r.parts_bytes.values()) / r.decisions:,.0f} ({kinds}) | {r.export_seconds:.1f} | "
                     f"{s.seconds:.1f} | {p.seconds:.1f} | {s.seconds / p.seconds:.1f}x | {s.peak_mb:,.0f} | "
                     f"{p.peak_mb:,.0f} | {'yes' if s.digest == p.digest else 'NO'} |")  # fmt: skip
    return "\n".join(lines)


def write_parts(folder: Path, n: int, scored_share: float, *, seed: int = 0, dim: int = 384,
                embedding_model: str = "bench") -> None:  # fmt: skip
    """The day parts a store of ``n`` of :func:`~regret_gateway.bench.report.fill_store`'s decisions would export
    (the same teams, tiers, models, prices and 2,000 prompts a team; a score within its request's day), written
    straight from arrays: for sizes whose store this machine cannot fill in a session."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from regret_gateway.bench.report import PRICE, TEAMS, TIERS
    from regret_gateway.store.parts import DECISIONS, EMBEDDINGS, FEEDBACK, schema_of

    rng = np.random.default_rng(seed)
    prompts = rng.normal(size=(TEAMS, 2000, dim)).astype(np.float32)
    tiers, price = np.array(list(TIERS)), np.array([PRICE[m] for m in MODELS])
    for kind in (DECISIONS, FEEDBACK, EMBEDDINGS):
        (folder / kind).mkdir(parents=True, exist_ok=True)
    start = 0
    for d in range(DAYS):
        size = n // DAYS + (d < n % DAYS)
        day = UNTIL - timedelta(days=DAYS - d)
        ids = np.char.add("r", np.char.zfill(np.arange(start, start + size).astype(str), 9))
        start += size
        at = np.datetime64(day.replace(tzinfo=None), "us") + np.sort(rng.integers(0, 86_400_000_000, size)).astype(
            "timedelta64[us]"
        )
        team, model, prompt = rng.integers(TEAMS, size=size), rng.integers(len(MODELS), size=size), rng.integers(2000, size=size)
        tier = tiers[team % len(tiers)]
        columns = {"request_id": ids, "created_at": at, "team": np.char.add("team-", team.astype(str)), "tier": tier,
                   "lam": np.array([TIERS[t] for t in tiers])[team % len(tiers)], "router_version": None,
                   "embedding_model": embedding_model, "embedding_dim": dim, "chosen_model": np.array(MODELS)[model],
                   "propensity": 1.0 / len(MODELS), "mode": "exploration", "mock": False, "session_turn": None, "app": None,
                   "greedy_model": None, "cost_usd": price[model] * rng.exponential(1.0, size), "status": "success",
                   "answered_model": np.array(MODELS)[model]}  # fmt: skip
        schema = schema_of(DECISIONS)
        pq.write_table(pa.table({c: _column(v, size, schema.field(c).type) for c, v in columns.items()}, schema=schema),
                       folder / DECISIONS / f"{day:%Y-%m-%d}.parquet", compression="zstd")  # fmt: skip
        rows = np.flatnonzero(rng.random(size) < scored_share)
        quality = np.clip(0.3 + 0.15 * model[rows] + rng.normal(0, 0.2, len(rows)), 0, 1)
        feedback = {
            "request_id": ids[rows],
            "source": "user",
            "score": quality,
            "cost_usd": None,
            "updated_at": at[rows],
            "embedded": True,
        }
        schema = schema_of(FEEDBACK)
        pq.write_table(pa.table({c: _column(v, len(rows), schema.field(c).type) for c, v in feedback.items()}, schema=schema),
                       folder / FEEDBACK / f"{day:%Y-%m-%d}.parquet", compression="zstd")  # fmt: skip
        vectors = np.ascontiguousarray(prompts[team[rows], prompt[rows]])
        offsets = pa.py_buffer((np.arange(len(rows) + 1, dtype=np.int32) * dim * 4).tobytes())
        blobs = pa.Array.from_buffers(pa.binary(), len(rows), [None, offsets, pa.py_buffer(vectors.tobytes())])
        pq.write_table(pa.table({"request_id": pa.array(ids[rows]), "embedding": blobs}, schema=schema_of(EMBEDDINGS)),
                       folder / EMBEDDINGS / f"{day:%Y-%m-%d}.parquet", compression="zstd")  # fmt: skip


def _column(value, size: int, type_):
    """An Arrow array of ``size`` from an array, or from one value repeated (None: nulls)."""
    import pyarrow as pa

    if isinstance(value, np.ndarray):
        return pa.array(value, type=type_)
    return pa.nulls(size, type_) if value is None else pa.array(np.full(size, value), type=type_)


@dataclass(frozen=True)
class PartsRun:
    """The parts of ``decisions`` generated decisions: the window read, and a whole retrain from them."""

    decisions: int
    parts_bytes: dict[str, int]
    read: Read
    retrain: tuple[float, float, int, str] | None  # seconds, peak MB, rows fitted, status


def _retrain_from_parts(parts_url: str, workdir: str) -> tuple[float, int, str]:
    """(seconds, rows fitted, status) of ``retrain --parts`` over the 30-day window, publishing into ``workdir``."""
    from regret_gateway.bench.report import report_settings
    from regret_gateway.config import StoreSpec
    from regret_gateway.retrain import RetrainOptions, retrain
    from regret_gateway.store.migrate import upgrade

    url = f"sqlite:///{workdir}/store.db"  # where the published version is recorded; the rows come from the parts
    upgrade(url)
    settings = report_settings().model_copy(update={"store": StoreSpec(url=url), "artifacts_dir": f"{workdir}/artifacts"})
    engine = make_engine(url)
    started = time.perf_counter()
    result = retrain(settings, engine, RetrainOptions(parts=parts_url, since=UNTIL - timedelta(days=DAYS), until=UNTIL))
    engine.dispose()
    return time.perf_counter() - started, int(result.data.get("rows", 0)), str(result.status)


def measure_parts(folder: Path, decisions: int, retrain: bool, echo=None) -> PartsRun:
    """The window read from the parts at ``folder`` (and with ``retrain``, a whole retrain), each in its own process."""
    from regret_gateway.store.parts import KINDS

    (seconds, base, rows, scored, digest), peak = in_own_process(_read, "parts", "sqlite://", str(folder), timeout=7200)
    read = Read(seconds, float("nan") if peak is None else peak, float("nan") if base is None else base, rows, scored, digest)
    if echo is not None:
        echo(f"  parts reader: {seconds:.1f} s, peak {read.peak_mb:,.0f} MB, {scored:,} scored rows")
    fitted = None
    if retrain:
        (secs, n, status), rpeak = in_own_process(_retrain_from_parts, str(folder), str(folder.parent), timeout=7200)
        fitted = (secs, float("nan") if rpeak is None else rpeak, n, status)
        if echo is not None:
            echo(f"  retrain --parts: {secs:.1f} s, peak {fitted[1]:,.0f} MB, {n:,} rows fitted, {status}")
    return PartsRun(decisions, {k: _folder_bytes(folder / k) for k in KINDS}, read, fitted)


def parts_table(runs: list[PartsRun]) -> str:
    """Markdown: per size of generated parts, their bytes, the window read and the retrain."""
    lines = ["| decisions | scored | parts GB | B/decision | read s | read peak MB | read s per M decisions | "
             "retrain s (read + fits + gate) | retrain peak MB | rows fitted | retrain |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for r in runs:
        total = sum(r.parts_bytes.values())
        secs, peak, n, status = r.retrain or (float("nan"), float("nan"), 0, "not run")
        lines.append(f"| {r.decisions:,} | {r.read.scored:,} | {total / 1e9:.2f} | {total / r.decisions:,.0f} | "
                     f"{r.read.seconds:.1f} | {r.read.peak_mb:,.0f} | {r.read.seconds / (r.decisions / 1e6):.2f} | "
                     f"{secs:.1f} | {peak:,.0f} | {n:,} | {status} |")  # fmt: skip
    return "\n".join(lines)
