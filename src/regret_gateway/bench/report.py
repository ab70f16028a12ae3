"""The savings report against the store's size (``regret-gateway bench report``): a store filled with N
simulated decisions over 30 days (a share of them scored), then one report over the window timed in a
fresh process, with that process's peak memory."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np
from sqlalchemy.orm import Session

from regret_gateway.bench.own_process import in_own_process, peak_mb
from regret_gateway.config import Settings, TierSpec
from regret_gateway.store.engine import make_engine
from regret_gateway.store.records import DecisionRecord, FeedbackRecord, OutcomeRecord
from regret_gateway.store.writes import record_decisions, record_feedback

MODELS = ("small", "medium", "large", "xl")
PRICE = {"small": 1e-5, "medium": 1e-4, "large": 1e-3, "xl": 5e-3}  # USD a request, on average
TIERS = {"economy": 1000.0, "standard": 100.0, "premium": 1.0}
TEAMS = 12  # each on one tier
DAYS = 30
UNTIL = datetime(2026, 11, 30, tzinfo=timezone.utc)  # the window is [UNTIL - 30 days, UNTIL)
_BATCH = 5_000


def report_settings() -> Settings:
    """The deployment the simulated store belongs to: its models and tiers."""
    return Settings(models=MODELS, default_tier="standard", tiers={t: TierSpec(lam=lam) for t, lam in TIERS.items()})


def _batches(n: int, dim: int, scored: float, seed: int) -> Iterator[tuple[list[DecisionRecord], list[FeedbackRecord]]]:
    """``n`` decisions with outcomes spread over the window, ``scored`` of them with a user's score; 2,000
    distinct prompts a team, drawn again and again (a platform's repeated prompts)."""
    rng = np.random.default_rng(seed)
    tiers = list(TIERS)
    since = UNTIL - timedelta(days=DAYS)
    prompts = rng.normal(size=(2000, dim)).astype(np.float32)
    for start in range(0, n, _BATCH):
        size = min(_BATCH, n - start)
        team = rng.integers(TEAMS, size=size)
        model = rng.integers(len(MODELS), size=size)
        prompt = rng.integers(len(prompts), size=size)
        span = DAYS * 86400 / n  # each batch its slice of the window, in time order: a store is written as traffic comes
        at = np.sort(rng.uniform(start * span, (start + size) * span, size=size))
        cost = rng.exponential(1.0, size=size)
        quality = np.clip(0.3 + 0.15 * model + rng.normal(0, 0.2, size=size), 0, 1)
        scored_rows = rng.random(size) < scored
        decisions, scores = [], []
        for j in range(size):
            made = since + timedelta(seconds=float(at[j]))
            rid = f"r{start + j:09d}"
            m = MODELS[model[j]]
            tier = tiers[team[j] % len(tiers)]
            decisions.append(DecisionRecord(
                request_id=rid, tier=tier, lam=TIERS[tier], embedding_model="bench", embedding=prompts[prompt[j]],
                chosen_model=m, propensity=1.0 / len(MODELS), mode="exploration", team=f"team-{team[j]}",
                prompt_hash=f"p{team[j]}-{prompt[j]}", created_at=made,
                outcome=OutcomeRecord(request_id=rid, cost_usd=float(PRICE[m] * cost[j]), latency_ms=300.0),
            ))  # fmt: skip
            if scored_rows[j]:
                scores.append(FeedbackRecord(request_id=rid, score=float(quality[j]), created_at=made + timedelta(minutes=10)))
        yield decisions, scores


def fill_store(url: str, n: int, *, dim: int = 384, scored: float = 0.05, seed: int = 0, echo=None) -> None:
    """Write ``n`` simulated decisions (module doc) into the migrated store at ``url``."""
    engine = make_engine(url)
    try:
        for i, (decisions, scores) in enumerate(_batches(n, dim, scored, seed)):
            with Session(engine) as session, session.begin():
                record_decisions(session, decisions)
                record_feedback(session, scores)
            if echo is not None and (i + 1) % 40 == 0:
                echo(f"  filled {(i + 1) * _BATCH:,} of {n:,} decisions")
    finally:
        engine.dispose()


@dataclass(frozen=True)
class ReportRun:
    decisions: int
    seconds: float
    peak_mb: float  # the report process's peak resident memory
    base_mb: float  # the same process's resident memory before the report (Python and the imports)
    teams: int  # team-and-tier rows the report has


def _one_report(url: str) -> tuple[float, float | None, int]:
    """(seconds, peak MB before it, team-and-tier rows) of one 30-day report over the store at ``url``."""
    from regret_gateway.savings.report import savings_report

    settings = report_settings()
    engine = make_engine(url)
    base = peak_mb()
    started = time.perf_counter()
    with Session(engine) as session:
        report = savings_report(settings, session, UNTIL - timedelta(days=DAYS), UNTIL)
        report.text()
    seconds = time.perf_counter() - started
    engine.dispose()
    return seconds, base, len(report.teams)


def time_report(url: str, decisions: int) -> ReportRun:
    """One 30-day report over the store at ``url``, in a fresh process (its peak memory is the report's)."""
    (seconds, base, teams), peak = in_own_process(_one_report, url, timeout=3600)
    return ReportRun(decisions, seconds, float("nan") if peak is None else peak, float("nan") if base is None else base, teams)


def report_table(runs: list[ReportRun]) -> str:
    """Markdown: each store size's report time and memory, with ratios to the smallest store."""
    lines = ["| decisions | report seconds | peak MB | MB before the report | team rows | time / smallest's | size / smallest's |",
             "|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    first = runs[0]
    for r in runs:
        lines.append(f"| {r.decisions:,} | {r.seconds:.2f} | {r.peak_mb:,.0f} | {r.base_mb:,.0f} | {r.teams} | "
                     f"{r.seconds / first.seconds:.2f} | {r.decisions / first.decisions:.1f} |")  # fmt: skip
    return "\n".join(lines)
