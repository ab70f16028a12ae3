"""What retrain learns from: the store's scored decisions as :class:`~regret_gateway.data.LoggedFeedback`,
with what was left out and why, and its export for offline work."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from regret_gateway.data import LoggedFeedback
from regret_gateway.store.queries import source_rank
from regret_gateway.store.schema import Decision, Feedback, Outcome
from regret_gateway.tables import write_columns


@dataclass(frozen=True)
class TrainingSet:
    """Logged feedback built from the store, with what was left out and why."""

    logged: LoggedFeedback | None  # None when no row is usable
    request_ids: tuple[str, ...]
    created_at: np.ndarray  # (n,) datetime64[us]
    teams: tuple[str | None, ...]
    tiers: tuple[str, ...]
    modes: tuple[str, ...]
    router_versions: tuple[str | None, ...]  # (n,) the router version that chose (None: cold start)
    embedding_model: str | None
    skipped: dict[str, int] = field(default_factory=dict)
    sources: tuple[str, ...] = ()  # (n,) where each row's quality score came from
    loggers: tuple[str, ...] = ()  # (n,) the policy that logged each row (:func:`logger_labels`)
    spend_by_source: dict[str, float] = field(default_factory=dict)  # what the window's scores cost (the judge's calls)

    @property
    def n_rows(self) -> int:
        return len(self.request_ids)

    def rows_by_source(self) -> dict[str, int]:
        names, counts = np.unique(np.array(self.sources, dtype=object), return_counts=True) if self.sources else ((), ())
        return {str(k): int(v) for k, v in zip(names, counts)}


def training_set(
    session: Session,
    *,
    model_names: Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    team: str | None = None,
    embedding_model: str | None = None,
    feedback: Sequence[str] | None = None,
) -> TrainingSet:
    """Decisions joined with their outcome and current feedback, as :class:`LoggedFeedback`.

    A request's quality score is the best-ranked of its sources (``feedback``: the sources to use, in
    order, e.g. ``("user", "judge")``; None: every source, user first and the judge last, see
    :func:`source_rank`). Rows are kept when the request succeeded, has a quality score from one of them, was embedded by ``embedding_model``
    (default: the most frequent one in the window), was not a fail-open fallback and chose one of
    ``model_names`` (default: every model seen, sorted). The rest are counted in ``skipped``:
    ``no_outcome``, ``failed``, ``no_feedback``, ``fallback``, ``other_embedder``, ``unknown_model``."""
    q = (
        select(
            Decision.request_id,
            Decision.created_at,
            Decision.team,
            Decision.tier,
            Decision.lam,
            Decision.embedding_model,
            Decision.embedding_dim,
            Decision.embedding,
            Decision.chosen_model,
            Decision.propensity,
            Decision.mode,
            Decision.router_version,
            Outcome.cost_usd,
            Outcome.status,
        )
        .outerjoin(Outcome, Outcome.request_id == Decision.request_id)
        .order_by(Decision.created_at, Decision.request_id)
    )
    window = []
    if since is not None:
        window.append(Decision.created_at >= since)
    if until is not None:
        window.append(Decision.created_at < until)
    if team is not None:
        window.append(Decision.team == team)
    rows = session.execute(q.where(*window)).all()
    rank = source_rank(feedback)
    best: dict[str, tuple[int, str, float]] = {}  # request id -> (rank, source, score) of its best-ranked score
    spend: dict[str, float] = {}
    for rid, src, score, cost in session.execute(
        select(Feedback.request_id, Feedback.source, Feedback.score, Feedback.cost_usd).join(Decision).where(*window)
    ):
        if cost:
            spend[src] = spend.get(src, 0.0) + cost
        k = rank(src)
        if k is not None and (rid not in best or (k, src) < best[rid][:2]):
            best[rid] = (k, src, score)
    skipped = {"no_outcome": 0, "failed": 0, "no_feedback": 0, "fallback": 0, "other_embedder": 0, "unknown_model": 0}
    if embedding_model is None and rows:
        names, counts = np.unique(
            [r.embedding_model for r in rows if r.mode != "fallback"] or [r.embedding_model for r in rows], return_counts=True
        )
        embedding_model = str(names[np.argmax(counts)])
    usable = []
    for r in rows:
        if r.cost_usd is None:
            skipped["no_outcome"] += 1
        elif r.status != "success":
            skipped["failed"] += 1
        elif r.request_id not in best:
            skipped["no_feedback"] += 1
        elif r.mode == "fallback":  # routing failed: not a draw of the logging policy
            skipped["fallback"] += 1
        elif r.embedding_model != embedding_model:
            skipped["other_embedder"] += 1
        else:
            usable.append(r)
    chosen_names = tuple(model_names) if model_names is not None else tuple(sorted({r.chosen_model for r in usable}))
    index = {m: i for i, m in enumerate(chosen_names)}
    kept = [r for r in usable if r.chosen_model in index]
    skipped["unknown_model"] = len(usable) - len(kept)
    logged = None
    if kept:
        dim = kept[0].embedding_dim
        X = np.frombuffer(b"".join(r.embedding for r in kept), dtype="<f4").reshape(len(kept), dim)
        # a row imported without a propensity carries NaN (LoggedFeedback.imported): retrain estimates its logging
        # policy (XGBoost) and keeps every other row's logged value
        propensity = np.array([np.nan if r.propensity is None else r.propensity for r in kept])
        logged = LoggedFeedback(
            X=X,
            action=np.array([index[r.chosen_model] for r in kept]),
            quality=np.array([best[r.request_id][2] for r in kept]),
            cost=np.array([r.cost_usd for r in kept]),
            model_names=chosen_names,
            propensity=propensity,
            lam=np.array([r.lam for r in kept]),
        )
    return TrainingSet(
        logged=logged,
        request_ids=tuple(r.request_id for r in kept),
        created_at=np.array([r.created_at.replace(tzinfo=None) for r in kept], dtype="datetime64[us]"),
        teams=tuple(r.team for r in kept),
        tiers=tuple(r.tier for r in kept),
        modes=tuple(r.mode for r in kept),
        router_versions=tuple(r.router_version for r in kept),
        embedding_model=embedding_model,
        skipped=skipped,
        sources=tuple(best[r.request_id][1] for r in kept),
        spend_by_source=spend,
        loggers=logger_labels(tuple(r.tier for r in kept), tuple(r.router_version for r in kept), tuple(r.mode for r in kept)),
    )


def logger_labels(tiers: Sequence[str], versions: Sequence[str | None], modes: Sequence[str]) -> tuple[str, ...]:
    """(n,) the logging policy of each row, decided once as the store is read: its tier under the router
    version that chose it (cold start: no version); every imported row one historical policy. Rows of one
    label were drawn from one randomised policy."""
    return tuple("imported" if mode == "imported" else f"{tier}|{version or 'cold-start'}"
                 for tier, version, mode in zip(tiers, versions, modes))  # fmt: skip


def export_training_set(ts: TrainingSet, path: str | Path) -> Path:
    """Write a training set for offline work: ``.parquet`` (needs pyarrow) or ``.csv``/``.csv.gz``.
    Columns: request_id, created_at, team, tier, lam, mode, model, propensity (empty when not logged),
    quality, cost_usd, x0..x{d-1}."""
    path = Path(path)
    if ts.logged is None:
        raise ValueError("the training set is empty: nothing to export")
    lg = ts.logged
    assert lg.lam is not None  # the store logs every row's lambda
    columns: dict[str, list] = {
        "request_id": list(ts.request_ids),
        "created_at": ts.created_at.astype(str).tolist(),
        "team": list(ts.teams),
        "tier": list(ts.tiers),
        "lam": lg.lam.tolist(),
        "mode": list(ts.modes),
        "model": [lg.model_names[a] for a in lg.action],
        "propensity": [
            None if imported else float(p)
            for imported, p in zip(lg.imported, lg.propensity if lg.propensity is not None else np.zeros(lg.n_samples))
        ],  # fmt: skip
        "quality": lg.quality.tolist(),
        "cost_usd": lg.cost.tolist(),
    }
    for j in range(lg.X.shape[1]):
        columns[f"x{j}"] = lg.X[:, j].tolist()
    return write_columns(path, columns)
