"""A budgeted team's request routed at a position on its ladder (:mod:`regret_gateway.budgets.ladder`): at u = j + s
it goes to rung j with probability 1 - s and to rung j + 1 with s, so the logged propensity is the mixture's,
exact. A rung is a tier's policy (its exploration included), one model, or the cheapest model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from regret_gateway.budgets.ladder import CHEAPEST, Ladder, Rung

Distribution = tuple[np.ndarray, int, dict | None]  # (p over the configured models, the likeliest index, the scores)


def rung_distribution(rung: Rung, models: Sequence[str], tiers: Sequence[str], cheapest: str,
                      tier_distribution: Callable[[str], Distribution], tier: str) -> Distribution:  # fmt: skip
    """One rung's distribution: a tier's (``tier_distribution(name)``), one model's, or ``cheapest``'s; a rung
    naming a tier or model no longer configured routes as the request's own ``tier``."""
    if rung.kind == "tier" and rung.name in tiers:
        return tier_distribution(rung.name)
    if rung.kind == "model" and rung.name in models:
        return np.eye(len(models))[models.index(rung.name)], models.index(rung.name), None
    if rung.kind == CHEAPEST:
        best = models.index(cheapest)
        return np.eye(len(models))[best], best, None
    return tier_distribution(tier)


def mixed(ladder: Ladder, position: float, distribution_of: Callable[[Rung], Distribution]) -> Distribution:
    """The distribution at ``position``: rung j's and rung j + 1's mixed by the fraction s; the likeliest model
    the heavier rung's, the scores rung j's."""
    j, s = ladder.split(position)
    p, best, scores = distribution_of(ladder.rungs[j])
    if s > 1e-9:
        p_next, best_next, _ = distribution_of(ladder.rungs[j + 1])
        p = (1.0 - s) * p + s * p_next
        best = best if 1.0 - s >= s else best_next
    return p, best, scores
