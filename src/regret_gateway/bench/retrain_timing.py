"""``regret-gateway bench retrain``: how retrain time grows with the number of logged rows.

Synthetic logs of the production shape (384-d embeddings, 4 models, exact propensities from an
epsilon-greedy logging policy, quality that depends on x) are written to a scratch SQLite store, then
the full pipeline (read, fit nuisance + RM-Interval for 3 tiers, off-policy evaluation, publish) is
timed for each size in one run.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.bench.own_process import in_own_process
from regret_gateway.config import EmbedderSpec, Settings, StoreSpec, TierSpec
from regret_gateway.sampling import MAX_ROWS
from regret_gateway.store.engine import make_engine
from regret_gateway.store.migrate import upgrade
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.writes import record_decisions, record_feedback

MODELS = ("small", "code", "math", "large")
COST = np.array([1e-4, 4e-4, 4e-4, 2e-3])
TIERS = {"premium": TierSpec(lam=0.0), "standard": TierSpec(lam=200.0), "economy": TierSpec(lam=1000.0)}


@dataclass(frozen=True)
class RetrainTiming:
    """One retrain of ``rows`` logged rows: cross-fitted (five fits, two past 60,000 rows) or one fit, its status and step times."""

    rows: int
    cross_fit: bool
    status: str
    fill_s: float  # writing the synthetic logs (not part of retrain)
    read_s: float
    fit_s: float
    evaluate_s: float
    total_s: float
    kept_rows: int  # what the fits learned from (a window past RetrainOptions.max_rows is sampled)
    peak_rss_mb: float | None  # the retrain process's peak resident memory (None: not measured on this system)
    precision: str = "auto"  # RetrainOptions.precision (retrain --precision)


def retrain_table(results: list[RetrainTiming]) -> str:
    """Markdown: each retrain's times, per 10,000 rows, against the first and against one fit of its size and
    precision."""
    one_fit = {(r.rows, r.precision): r.total_s for r in results if not r.cross_fit}
    lines = ["| rows | rows fitted | evaluation | precision | total s | read s | fit s | evaluate s | peak RSS MB | s per 10k rows | time ratio vs first | vs one fit |",
             "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in results:
        rss = "-" if r.peak_rss_mb is None else f"{r.peak_rss_mb:,.0f}"
        lines.append(
            f"| {r.rows} | {r.kept_rows} | {'cross-fitted' if r.cross_fit else 'one fit'} | {r.precision} | {r.total_s:.1f} | {r.read_s:.1f} | "
            f"{r.fit_s:.1f} | {r.evaluate_s:.1f} | {rss} | {1e4 * r.total_s / r.rows:.2f} | "
            f"{r.total_s / results[0].total_s:.2f} | {r.total_s / one_fit[r.rows, r.precision]:.2f} |"
        )
    return "\n".join(lines)


def _fill(engine, n: int, dim: int, seed: int, chunk: int = 5000) -> None:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(4, dim)).astype(np.float32)
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        family = rng.integers(4, size=m)
        X = centers[family] + rng.normal(scale=1.0, size=(m, dim)).astype(np.float32)
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        p_correct = np.full((m, 4), 0.3)
        p_correct[np.arange(m), family] = 0.9
        p_correct[:, 3] = 0.92
        eps = 0.2
        greedy = family
        explore = rng.random(m) < eps
        action = np.where(explore, rng.integers(4, size=m), greedy)
        propensity = eps / 4 + (1 - eps) * (action == greedy)
        quality = (rng.random(m) < p_correct[np.arange(m), action]).astype(float)
        ids = [f"r{start + i}" for i in range(m)]
        records = [
            DecisionRecord(
                request_id=ids[i],
                tier="standard",
                lam=200.0,
                embedding_model=EmbedderSpec().embedding_id,  # what the default settings' retrain reads
                embedding=X[i],
                chosen_model=MODELS[action[i]],
                propensity=float(propensity[i]),
                mode="exploration" if explore[i] else "policy",
                outcome=OutcomeRecord(ids[i], cost_usd=float(COST[action[i]])),
            )
            for i in range(m)
        ]
        with Session(engine) as s, s.begin():
            record_decisions(s, records)
            record_feedback(s, [FeedbackRecord(ids[i], float(quality[i])) for i in range(m)])


def _one_retrain(settings: Settings, options) -> tuple[str, str, dict, int]:
    """One retrain in this process: (status, reason, step seconds, rows fitted)."""
    from regret_gateway.retrain import retrain

    engine = make_engine(settings.store.url)
    result = retrain(settings, engine, options)
    engine.dispose()
    return result.status, result.reason, result.seconds, result.data.get("rows", 0)


def retrain_in_own_process(settings: Settings, options) -> tuple[str, str, dict, int, float | None]:
    """One retrain in a fresh process, so that its peak memory is its own: (status, reason, step seconds,
    rows fitted, peak MB)."""
    (status, reason, seconds, rows), peak = in_own_process(_one_retrain, settings, options)
    return status, reason, seconds, rows, peak


def time_retrain(sizes: list[int], *, dim: int = 384, seed: int = 0, echo=print, precisions: tuple[str, ...] = ("auto",),
                 max_rows: int | None = MAX_ROWS, run: Callable[[Settings, Any], tuple[str, str, dict, int, float | None]] = retrain_in_own_process
                 ) -> list[RetrainTiming]:  # fmt: skip
    """For each size: one store of ``n`` logged rows, retrained from scratch at each of ``precisions``
    (``RetrainOptions.precision``) twice -- cross-fitted (the default: five fits, two past 60,000 rows) and
    with ``cross_fit=False`` (one fit) -- so the times are measured side by side.
    Each retrain is ``run`` (default: in a fresh process, so its peak memory is its own), with retrain's
    defaults otherwise (a window past ``max_rows``, retrain's ``--max-rows``, is sampled)."""
    from regret_gateway.retrain import RetrainOptions

    rows: list[RetrainTiming] = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/bench.db"
            upgrade(url)
            engine = make_engine(url)
            t0 = time.perf_counter()
            _fill(engine, n, dim, seed)
            fill = time.perf_counter() - t0
            engine.dispose()
            for precision, cross_fit in [(p, cf) for p in precisions for cf in (True, False)]:
                folder = Path(tmp) / f"{precision}-{'cross-fitted' if cross_fit else 'one-fit'}"
                settings = Settings(
                    models=MODELS,
                    tiers=TIERS,
                    default_tier="standard",
                    artifacts_dir=str(folder / "artifacts"),
                    store=StoreSpec(url=url),
                )
                options = RetrainOptions(n_boot=200, cross_fit=cross_fit, out=folder / "reports", precision=precision,
                                         max_rows=max_rows)  # fmt: skip
                status, reason, sec, kept, peak = run(settings, options)
                row = RetrainTiming(n, cross_fit, status, fill, sec.get("read", 0.0), sec.get("fit", 0.0),
                                    sec.get("evaluate", 0.0), sec.get("total", float("nan")), kept, peak, precision)  # fmt: skip
                rows.append(row)
                echo(f"{n} rows, {folder.name}: {row.status}, retrain {row.total_s:.1f}s on {kept} rows "
                     f"(read {row.read_s:.1f}, fit {row.fit_s:.1f}, evaluate {row.evaluate_s:.1f}), peak RSS "
                     f"{'-' if peak is None else f'{peak:,.0f} MB'}")  # fmt: skip
    return rows
