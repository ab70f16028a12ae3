"""The frontier ladders retrain publishes for budgeted teams (:mod:`regret_gateway.ladder`).

Every model and every tier's published policy is a candidate rung; each is valued on the held-out rows by
the gate's own estimator (:class:`regret_gateway.ope.LoggedData`: doubly robust, each logger's correction
weighted by what it saw of the candidate's choices, so a few rows logged at a tiny propensity do not
swing a model's estimate), quality and cost per request apart; a tier by its policy's greedy choices
(its exploration, a few percent of its requests, is not valued). The ladder is the upper concave hull
of those points, from the best to the cheapest.
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from regret_gateway.config import Settings
from regret_gateway.ladder import Ladder, Rung, frontier_ladder
from regret_gateway.ope import DR, LoggedData
from regret_gateway.servable import ServablePolicy

MIN_TEAM_ROWS = 1_000  # a budgeted team's frontier is valued on its own requests from this many; else on everyone's


def _rows(data: LoggedData, rows: np.ndarray) -> LoggedData:
    """The rows ``rows`` of ``data`` (their loggers and prompts kept)."""
    return LoggedData(data.logged[rows], data.quality[rows], data.cost[rows], np.asarray(data.propensity)[rows],
                      data.quality_hat[rows], data.cost_hat[rows],
                      strata=None if data.strata is None else data.strata[rows],
                      groups=None if data.groups is None else data.groups[rows])  # fmt: skip


def frontier(settings: Settings, policy: ServablePolicy, X: np.ndarray, data: LoggedData) -> Ladder:
    """The frontier ladder of the held-out requests ``X`` (n, d) with their evaluation ``data`` (columns:
    ``policy.model_names``): every model of ``policy`` and every tier's policy, valued as the module says."""
    names = list(policy.model_names)
    candidates = []

    def point(kind: str, name: str, lam: float, actions: np.ndarray) -> Rung:
        _, quality, cost = data.outcomes(actions, 0.0)
        return Rung(kind, name, lam, float(DR.estimate(cost)), float(DR.estimate(quality)))

    for t, name in enumerate(names):
        if name in settings.models:
            candidates.append(point("model", name, 0.0, np.full(len(X), t)))
    for name, spec in settings.tiers_by_lambda():
        candidates.append(point("tier", name, spec.lam, policy.choose(X, spec.lam)))
    return frontier_ladder(candidates)


def budget_ladders(settings: Settings, policy: ServablePolicy, X: np.ndarray, data: LoggedData,
                   team_rows: dict[str, np.ndarray], created_at: np.ndarray) -> dict[str, list[dict]]:  # fmt: skip
    """What retrain publishes as ``data.budget_ladder``: ``"*"``, the frontier of every held-out request
    ``X`` (for a team without enough requests of its own, or one added after this retrain), and per
    budgeted team with MIN_TEAM_ROWS held-out requests (``team_rows``: each budgeted team's rows), the
    frontier of those of its budget period's length (all of its requests if fewer are that recent). Each
    rung carries its forecast cost per request: where a team's first period starts."""
    from regret_gateway.budgets import period_bounds

    out = {"*": frontier(settings, policy, X, data).to_json()}
    now = datetime.now(timezone.utc)
    for team, rows in team_rows.items():
        budget = settings.teams[team].budget
        if budget is None or len(rows) < MIN_TEAM_ROWS:
            continue
        start, end = period_bounds(budget.per, now)
        recent = rows[created_at[rows] >= np.datetime64((now - (end - start)).replace(tzinfo=None), "us")]
        rows = recent if len(recent) >= MIN_TEAM_ROWS else rows
        out[team] = frontier(settings, policy, X[rows], _rows(data, rows)).to_json()
    return out
