"""The ladders retrain publishes for budgeted teams (:mod:`regret_gateway.budgets.ladder`): the frontier, and the
tiers' ladder with its forecast costs.

Every model and every tier's published policy is a candidate rung; each is valued on the held-out rows by
the gate's own estimator (:class:`regret_gateway.causal.ope.LoggedData`: doubly robust, each logger's correction
weighted by what it saw of the candidate's choices, so a few rows logged at a tiny propensity do not
swing a model's estimate), quality and cost per request apart; a tier by its policy's greedy choices
(its exploration, a few percent of its requests, is not valued). The ladder is the upper concave hull
of those points, from the best to the cheapest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone

import numpy as np

from regret_gateway.budgets.ladder import CHEAPEST, EVERYONE, BudgetLadders, Ladder, Rung, frontier_ladder
from regret_gateway.budgets.periods import period_bounds
from regret_gateway.causal.ope import DR, N_BOOT, LoggedData
from regret_gateway.confidence import ALPHA, confidently_above, family_alpha
from regret_gateway.servable import PublishedRouter

MIN_TEAM_ROWS = 1_000  # a budgeted team's frontier is valued on its own requests from this many; else on everyone's


def flag_dominated(rungs: list[Rung], actions: list[np.ndarray], data: LoggedData, *, n_boot: int = N_BOOT,
                   alpha: float = ALPHA, seed: int = 0) -> list[Rung]:  # fmt: skip
    """``rungs`` (dearest first, with their estimated cost), each flagged ``dominated`` where another rung
    (``actions``: each rung's choices on the rows of ``data``) makes the same choice on every row and lies
    further down, or where another rung that costs no more, or a random mix of two others that costs the
    same, is confidently better: the lower end of the paired bootstrap interval of the quality gain (over
    the gate's resamples, :meth:`~regret_gateway.causal.ope.LoggedData.bootstrap`) above 0, at ``alpha`` shared
    among the comparisons made. A point estimate is not enough: a learned tier valued on the rows the gate
    chose it on is flattered by them, and a dearer tier a point behind it may be the better one."""
    boot, shifts = data.bootstrap(n_boot, seed), data.shifts(n_boot, seed)
    quality = [data.outcomes(a, 0.0)[1].dr(boot, shifts) for a in actions]  # (B,) per rung: the resamples
    usd = [float(r.usd) for r in rungs]  # type: ignore[arg-type]

    def rivals_at_its_cost(j: int, rivals: list[int]):
        """Each rival that costs no more than rung j, and each mix of two that costs what j does."""
        for i in rivals:
            if usd[i] <= usd[j]:
                yield quality[i]
                for k in rivals:
                    if usd[i] < usd[j] < usd[k]:
                        s = (usd[j] - usd[i]) / (usd[k] - usd[i])
                        yield (1.0 - s) * quality[i] + s * quality[k]

    out = []
    for j, rung in enumerate(rungs):
        others = [i for i in range(len(rungs)) if i != j]
        same = [i for i in others if np.array_equal(actions[i], actions[j])]
        found = list(rivals_at_its_cost(j, [i for i in others if i not in same]))
        family = family_alpha(alpha, len(found))
        dominated = any(i > j for i in same) or any(confidently_above(q - quality[j], 0.0, family) for q in found)
        out.append(replace(rung, dominated=dominated))
    return out


def ladders(tiers: Sequence[tuple[str, float]], models: Sequence[str], router: PublishedRouter, X: np.ndarray,
            data: LoggedData, *, n_boot: int = N_BOOT,
            seed: int = 0) -> dict[str, Ladder]:  # fmt: skip
    """The two ladders of the held-out requests ``X`` (n, d) with their evaluation ``data`` (columns:
    ``router.model_names``), every rung with its estimated cost and quality per request: ``"frontier"``, the
    upper hull of every model of ``router`` and every tier's policy (valued as the module says), and
    ``"tiers"``, the tiers by lambda and then the cheapest model (the default ladder, with its forecast),
    each rung flagged where another dominates it (:func:`flag_dominated`)."""
    names = list(router.model_names)

    def point(kind: str, name: str, lam: float, actions: np.ndarray) -> Rung:
        _, quality, cost = data.outcomes(actions, 0.0)
        return Rung(kind, name, lam, float(DR.estimate(cost)), float(DR.estimate(quality)))

    model_actions = {name: np.full(len(X), t) for t, name in enumerate(names) if name in models}
    model_rungs = [point("model", name, 0.0, a) for name, a in model_actions.items()]
    by_lambda = sorted(tiers, key=lambda t: t[1])
    tier_actions = [router.choose(name, X, lam) for name, lam in by_lambda]
    tier_rungs = [point("tier", name, lam, a) for (name, lam), a in zip(by_lambda, tier_actions)]
    cheapest = min(model_rungs, key=lambda r: r.usd)  # type: ignore[arg-type, return-value]
    ladder = [*tier_rungs, Rung(CHEAPEST, "", tier_rungs[-1].lam, cheapest.usd, cheapest.quality)]
    ladder_actions = [*tier_actions, model_actions[cheapest.name]]
    return {
        "frontier": frontier_ladder(model_rungs + tier_rungs),
        "tiers": Ladder(tuple(flag_dominated(ladder, ladder_actions, data, n_boot=n_boot, seed=seed))),
    }


def budget_ladders(tiers: Sequence[tuple[str, float]], models: Sequence[str], router: PublishedRouter, X: np.ndarray,
                   data: LoggedData, team_rows: Mapping[str, tuple[np.ndarray, str]], created_at: np.ndarray, *,
                   n_boot: int = N_BOOT, seed: int = 0) -> BudgetLadders:  # fmt: skip
    """What retrain publishes beside the tiers (:attr:`PublishedRouter.ladders`): per kind (``"frontier"``, ``"tiers"``:
    :func:`ladders`) ``"*"``, the ladder of every held-out request ``X`` (for a team without enough requests
    of its own, or one added after this retrain), and per budgeted team with MIN_TEAM_ROWS held-out
    requests (``team_rows``: each budgeted team's rows and its budget's period, ``day``, ``week`` or
    ``month``), the ladder of those of its budget period's length
    (all of its requests if fewer are that recent). Each rung carries its forecast cost per request: where
    a team's first period starts."""

    out: dict[str, dict[str, Ladder]] = {"frontier": {}, "tiers": {}}

    def add(key: str, found: dict[str, Ladder]) -> None:
        for kind, ladder in found.items():
            out[kind][key] = ladder

    add(EVERYONE, ladders(tiers, models, router, X, data, n_boot=n_boot, seed=seed))
    now = datetime.now(timezone.utc)
    for team, (rows, per) in team_rows.items():
        if len(rows) < MIN_TEAM_ROWS:
            continue
        start, end = period_bounds(per, now)
        recent = rows[created_at[rows] >= np.datetime64((now - (end - start)).replace(tzinfo=None), "us")]
        rows = recent if len(recent) >= MIN_TEAM_ROWS else rows
        add(team, ladders(tiers, models, router, X[rows], data.subset(rows), n_boot=n_boot, seed=seed))
    return BudgetLadders(**out)
