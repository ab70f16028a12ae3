"""Reads for the audit route and ``status``: one request's decision, outcome and scores, its team, and the
traffic summary; how scores from several sources rank."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from regret_gateway.store.records import (
    valid_request_id,
)
from regret_gateway.store.schema import Decision, Feedback, Outcome

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
