"""Repository functions over a :class:`~sqlalchemy.orm.Session`: the only code that writes or reads rows.

Writes take batches of validated records and are idempotent on the request id: decisions and outcomes
already present are left as they are, feedback replaces the one current score (``revision`` counts the
re-scorings). Every check runs before the first write, so a refused batch changes nothing. The caller
owns the transaction (``with session.begin(): ...``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from regret_gateway.data import LoggedFeedback
from regret_gateway.store.records import (
    DecisionRecord,
    FeedbackRecord,
    OutcomeRecord,
    StoreInputError,
    UnknownRequestError,
    valid_request_id,
)
from regret_gateway.store.schema import Decision, Feedback, Outcome, RouterVersion, utcnow
from regret_gateway.tables import write_columns

_ID_CHUNK = 1000  # ids per IN (...) list
_ROW_CHUNK = 1000  # rows per multi-row INSERT (SQLite allows 32,766 bound parameters)


def _chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _insert(session: Session):
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert
    raise NotImplementedError(f"the store supports SQLite and PostgreSQL, not {dialect!r}")


def _existing(session: Session, column, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for chunk in _chunks(list(ids), _ID_CHUNK):
        found.update(session.scalars(select(column).where(column.in_(chunk))))
    return found


def _unique_last(records: Sequence, key=lambda r: r.request_id) -> list:
    """One record per request id; the last one wins (a re-score within one batch)."""
    return list({key(r): r for r in records}.values())


def record_decisions(session: Session, records: Sequence[DecisionRecord]) -> int:
    """Insert decisions (and the outcomes riding on them). Returns the number of new decisions.

    Refuses the whole batch (:class:`StoreInputError`) when an embedding's size differs from other
    embeddings of the same embedding model, in the batch or already stored."""
    if not records:
        return 0
    dims: dict[str, int] = {}
    for r in records:
        expected = dims.setdefault(r.embedding_model, int(r.embedding.size))
        if r.embedding.size != expected:
            raise StoreInputError(
                f"request {r.request_id!r}: embedding has {r.embedding.size} values but other '{r.embedding_model}' "
                f"embeddings in this batch have {expected}"
            )
    for model, dim in dims.items():
        stored = session.scalar(select(Decision.embedding_dim).where(Decision.embedding_model == model).limit(1))
        if stored is not None and stored != dim:
            raise StoreInputError(f"embedding model '{model}' has {stored}-d embeddings in the store, got {dim}-d")
    new_rows = _insert_new(session, Decision, records)
    outcomes = [r.outcome for r in records if r.outcome is not None]
    if outcomes:
        _insert_new(session, Outcome, outcomes)
    return new_rows


def _insert_new(session: Session, table, records: Sequence) -> int:
    """Insert the records whose request id ``table`` does not hold yet (the first record of an id wins);
    returns how many. ON CONFLICT DO NOTHING covers a concurrent writer."""
    first = {r.request_id: r for r in reversed(records)}
    present = _existing(session, table.request_id, list(first))
    new = [r for rid, r in first.items() if rid not in present]
    insert = _insert(session)
    for chunk in _chunks(new, _ROW_CHUNK):
        session.execute(insert(table).on_conflict_do_nothing(index_elements=["request_id"]), [r.row() for r in chunk])
    return len(new)


def unknown_request_ids(session: Session, ids: Sequence[str]) -> list[str]:
    """The ids among ``ids`` that have no routing decision, sorted."""
    return sorted(set(ids) - _existing(session, Decision.request_id, ids))


def _require_known(session: Session, ids: Sequence[str]) -> None:
    if unknown := unknown_request_ids(session, ids):
        raise UnknownRequestError(unknown)


def record_outcomes(session: Session, records: Sequence[OutcomeRecord]) -> int:
    """Insert outcomes of known decisions; the first outcome of a request is kept. Returns new rows."""
    if not records:
        return 0
    _require_known(session, [r.request_id for r in records])
    return _insert_new(session, Outcome, records)


def record_feedback(session: Session, records: Sequence[FeedbackRecord]) -> int:
    """Set the current quality score of known requests, one per request and source (insert, or replace
    and bump ``revision``): a user's score and the judge's live side by side. Returns records applied."""
    if not records:
        return 0
    latest = _unique_last(records, key=lambda r: (r.request_id, r.source))
    _require_known(session, [r.request_id for r in latest])
    insert = _insert(session)
    for chunk in _chunks(latest, _ROW_CHUNK):
        stmt = insert(Feedback)
        stmt = stmt.on_conflict_do_update(
            index_elements=["request_id", "source"],
            set_={
                "score": stmt.excluded.score,
                "cost_usd": stmt.excluded.cost_usd,
                "updated_at": stmt.excluded.updated_at,
                "revision": Feedback.revision + 1,
            },
        )
        session.execute(
            stmt,
            [
                {
                    "request_id": r.request_id,
                    "score": r.score,
                    "source": r.source,
                    "cost_usd": r.cost_usd,
                    "created_at": r.created_at,
                    "updated_at": r.created_at,
                    "revision": 1,
                }
                for r in chunk
            ],
        )
    return len(latest)


JUDGE_SOURCE = "judge"  # the source of the gateway's LLM judge scores (gateway/judge.py)


def source_rank(sources: Sequence[str] | None) -> Callable[[str], int | None]:
    """How a request's scores from several sources are ranked: ``sources`` in that order (others
    ignored), or, with None, every source -- ``user`` first, the judge last, the rest by name between."""
    if sources is not None:
        order = {src: i for i, src in enumerate(sources)}
        return order.get
    return lambda src: 0 if src == "user" else 2 if src == JUDGE_SOURCE else 1


def _feedback_view(f: Feedback) -> dict:
    return {"score": f.score, "source": f.source, "revision": f.revision, "updated_at": f.updated_at.isoformat(),
            "cost_usd": f.cost_usd}  # fmt: skip


def get_decision(session: Session, request_id: str) -> dict | None:
    """The audit view of one request: its decision, outcome and feedback (None if unknown): ``feedback``
    is the score retrain takes by default (:func:`source_rank`), ``feedback_by_source`` every source's."""
    if not valid_request_id(request_id):
        return None
    row = session.execute(
        select(Decision, Outcome)
        .outerjoin(Outcome, Outcome.request_id == Decision.request_id)
        .where(Decision.request_id == request_id)
    ).first()
    if row is None:
        return None
    d, o = row
    rank = source_rank(None)
    scores = sorted(
        session.scalars(select(Feedback).where(Feedback.request_id == request_id)), key=lambda f: (rank(f.source), f.source)
    )
    return {
        "request_id": d.request_id,
        "created_at": d.created_at.isoformat(),
        "team": d.team,
        "tier": d.tier,
        "lam": d.lam,
        "router_version": d.router_version,
        "chosen_model": d.chosen_model,
        "propensity": d.propensity,
        "mode": d.mode,
        "scores": d.scores,
        "embedding_model": d.embedding_model,
        "outcome": None
        if o is None
        else {
            "cost_usd": o.cost_usd,
            "prompt_tokens": o.prompt_tokens,
            "completion_tokens": o.completion_tokens,
            "latency_ms": o.latency_ms,
            "status": o.status,
            "error": o.error,
            "retries": o.retries,
        },
        "feedback": _feedback_view(scores[0]) if scores else None,
        "feedback_by_source": {f.source: _feedback_view(f) for f in scores},
    }


def decision_team(session: Session, request_id: str) -> tuple[bool, str | None]:
    """(exists, team) of a request: who may read or score it."""
    if not valid_request_id(request_id):
        return False, None
    team = session.execute(select(Decision.team).where(Decision.request_id == request_id)).first()
    return (False, None) if team is None else (True, team[0])


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
        # imported logs have no propensity: then none is passed and retrain estimates it (XGBoost)
        propensity = None if any(r.propensity is None for r in kept) else np.array([r.propensity for r in kept])
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
    )


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
        "propensity": [None] * lg.n_samples if lg.propensity is None else lg.propensity.tolist(),
        "quality": lg.quality.tolist(),
        "cost_usd": lg.cost.tolist(),
    }
    for j in range(lg.X.shape[1]):
        columns[f"x{j}"] = lg.X[:, j].tolist()
    return write_columns(path, columns)


def traffic_summary(session: Session, *, since: datetime | None = None) -> dict:
    """Counts for `regret-gateway status`: requests, outcomes, feedback coverage (in all and by source),
    the judge's spend, and how judge and user scores agree where a request has both."""
    from sqlalchemy import func
    from sqlalchemy.orm import aliased

    where = [] if since is None else [Decision.created_at >= since]
    total = session.scalar(select(func.count()).select_from(Decision).where(*where)) or 0
    outcome = session.scalar(select(func.count()).select_from(Decision).join(Outcome).where(*where)) or 0
    scored = session.scalar(select(func.count(func.distinct(Feedback.request_id))).join(Decision).where(*where)) or 0
    by_mode = dict(session.execute(select(Decision.mode, func.count()).where(*where).group_by(Decision.mode)).all())
    by_tier = dict(session.execute(select(Decision.tier, func.count()).where(*where).group_by(Decision.tier)).all())
    by_source = {
        src: {"scored": int(n), "coverage": n / total if total else 0.0, "cost_usd": float(cost or 0.0)}
        for src, n, cost in session.execute(
            select(Feedback.source, func.count(), func.sum(Feedback.cost_usd))
            .join(Decision)
            .where(*where)
            .group_by(Feedback.source)
        )
    }
    user, judge = aliased(Feedback), aliased(Feedback)
    pairs = np.array(
        session.execute(
            select(user.score, judge.score)
            .join(judge, (judge.request_id == user.request_id) & (judge.source == JUDGE_SOURCE))
            .join(Decision, Decision.request_id == user.request_id)
            .where(user.source == "user", *where)
        ).all(),
        dtype=float,
    ).reshape(-1, 2)
    agreement: dict = {"pairs": len(pairs)}
    if len(pairs):
        u, j = pairs[:, 0], pairs[:, 1]
        agreement["mean_abs_diff"] = float(np.abs(u - j).mean())
        agreement["same_side_of_half"] = float(((u >= 0.5) == (j >= 0.5)).mean())  # pass/fail agreement
        agreement["judge_minus_user"] = float((j - u).mean())  # > 0: the judge is more lenient
    return {
        "requests": total,
        "with_outcome": outcome,
        "with_feedback": scored,
        "feedback_coverage": scored / total if total else 0.0,
        "feedback_by_source": by_source,
        "judge_spend_usd": by_source.get(JUDGE_SOURCE, {}).get("cost_usd", 0.0),
        "judge_user_agreement": agreement,
        "by_mode": by_mode,
        "by_tier": by_tier,
    }


def publish_version(session: Session, version_id: str, artifact_path: str, metrics: dict) -> None:
    """Add a router version and make it the only active one."""
    session.execute(update(RouterVersion).where(RouterVersion.active.is_(True)).values(active=False))
    session.add(RouterVersion(id=version_id, artifact_path=artifact_path, metrics=metrics, active=True, created_at=utcnow()))


def active_version(session: Session) -> RouterVersion | None:
    return session.scalars(
        select(RouterVersion).where(RouterVersion.active.is_(True)).order_by(RouterVersion.created_at.desc())
    ).first()
