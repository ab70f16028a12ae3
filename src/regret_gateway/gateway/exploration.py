"""How much of a tier's traffic goes to models other than its choice, and which.

Policy decision for a tier (lambda, epsilon): the router's argmax t* over the models, or with a small
probability another model (:func:`exploration_distribution`):

* ``igw`` (default): inverse gap weighting (after SquareCB, Foster and Rakhlin 2020) over the router's
  utility estimates u (quality - lambda * cost, ``ServablePolicy.utility_estimates``): a model with gap
  g = max(0, u[t*] - u[t]) gets p = epsilon / (T - 1) / (1 + gamma * g), and never less than the floor
  ``min(min_propensity, epsilon / (T - 1))`` (default: a quarter of epsilon / (T - 1), so the importance
  weights of one model's rows differ by at most 4x across its exploration rows). Exploration goes where the router is least sure,
  and shrinks as its estimates separate the models: epsilon is spent in full only where every model
  looks as good as t*, and what exploring costs (sum of p * g, if the estimates are right) stays below
  epsilon / gamma plus the floor's share. The floor bounds the importance weight 1/p that the logs
  carry into retrain. Without utility estimates (an artifact that has none) the gaps count as 0.
* ``challengers``: IGW, and the models the estimates rank above t* (where the tier serves a constant
  or a router that disagrees with the estimator) share what IGW leaves of epsilon, each at least its IGW
  share: the comparisons the next retrain's gate has to make get rows at weights near k / epsilon
  instead of the floor's. Where nothing is ranked above t*, it is IGW.
* ``uniform``: epsilon-greedy, each model epsilon / T and t* 1 - epsilon + epsilon / T.

Under ``igw`` and ``challengers`` the tier's *lead contender* gets what IGW leaves of epsilon the same way,
beside the models ranked above t*. The contenders (``ServedTier.contenders``) are the models retrain's
logs could not show to be worse, as the tier's constant, than what it serves, the highest upper bound of
the gain first; the lead is the first that is not t*. A tier's first constant is chosen on a cold start's
few hundred rows a model; IGW's estimates rank a wrongly dismissed model low, so it would draw the floor's
share and the tier stayed on the wrong constant. Shared by eight contenders, what IGW leaves was still a
few rows a round each; given to the one the logs could most be wrong about (optimism, as in UCB), it is
epsilon's worth, and the next retrain settles it or names another lead
(docs/experiments/platform-replay.md). No contender left: IGW.

The logged propensity is the exact probability of the chosen model under that distribution.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def exploration_distribution(
    best: int,
    n_models: int,
    epsilon: float,
    *,
    rule: str = "igw",
    utilities: np.ndarray | None = None,
    gamma: float = 50.0,
    min_propensity: float | None = None,
    contenders: Sequence[int] = (),
) -> np.ndarray:
    """(T,) probability of routing to each model when the router's choice is ``best`` (see the module doc);
    ``contenders``: the tier's contenders' indices, lead first."""
    T = n_models
    p = np.zeros(T)
    if epsilon <= 0 or T == 1:
        p[best] = 1.0
        return p
    if rule == "uniform":
        p[:] = epsilon / T
        p[best] += 1.0 - epsilon
        return p
    if rule not in ("igw", "challengers"):
        raise ValueError(f"unknown exploration rule {rule!r}; use igw, challengers or uniform")
    others = np.arange(T) != best
    u = None if utilities is None else np.asarray(utilities, dtype=np.float64)
    gap = np.zeros(T) if u is None else np.maximum(u[best] - u, 0.0)
    share = epsilon / (T - 1)
    floor = share / 4 if min_propensity is None else min(min_propensity, share)
    p[others] = np.maximum(floor, share / (1.0 + gamma * gap[others]))
    ahead = np.zeros(T, dtype=bool)
    lead = next((int(c) for c in contenders if int(c) != best), None)
    if lead is not None:
        ahead[lead] = True
    if rule == "challengers" and u is not None:
        ahead |= others & (u > u[best])
    if ahead.any():  # what IGW leaves of epsilon goes to them: at least share each, since the rest <= share each
        p[ahead] = np.maximum(p[ahead], (epsilon - p[others & ~ahead].sum()) / ahead.sum())
    p[best] = 1.0 - p[others].sum()
    return p
