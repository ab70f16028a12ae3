"""Per-row DR scores with each logger's correction weighted by what it knows about each model: the gate's
multi-logger estimator (:mod:`regret_gateway.causal.ope`) spread over rows, for what reads per-row scores --
a tier's best constant and its regions (:mod:`regret_gateway.policy.regions`).

The plain DR score of model a on row i is r_i(a) + 1[t_i = a] / p_i (y_i - r_i(a)). Its mean over rows is
unbiased, but where most rows were logged by routers that explored a at a tiny propensity, a is almost
never drawn there: the realised mean is the outcome model's guess r on those rows, with a standard error
that does not see it (the draw that would correct it is missing from the sample). On a replay's logs a
model whose ten logged outcomes on a task were all 0 scored 21 points there, 16 above its truth, and a
region departed to it (docs/experiments/platform-replay.md). With loggers s (the cold start, each tier
under each router version) the pooled score is

    r_i(a) + f_{s_i, a} 1[t_i = a] / p_i (y_i - r_i(a)),   f_{s,a} = (n / kappa_{s,a}) / sum_s' (n_s' / kappa_{s',a})

so that the mean over rows is the gate's mean r + sum_s omega_{s,a} C_{s,a} for the constant a
(omega_{s,a} proportional to n_s / kappa_{s,a}; kappa_{s,a} the logger's mean inverse propensity of a as
what it favoured tells it, :meth:`~regret_gateway.causal.ope.LoggedData.inverse_propensities`): the
corrections of the loggers that saw a -- the cold start's uniform draws -- stand for the rows of those that
did not. With one logger it is the plain DR score. With ``blocks`` (the regions a test reads one by one)
n, n_s and kappa are each block's: a logger's share of a region's rows is not its share of all rows, and
the mean over a region's rows is then the gate's estimate on that region. The judge's corrected scores'
own uncertainty (``target_errors``) is the gate's to carry, not these scores'.
"""

from __future__ import annotations

import numpy as np

from regret_gateway.causal.estimators import CounterfactualScores
from regret_gateway.causal.ope import LoggedData


def pooled_scores(
    data: LoggedData, clip: tuple[float, float] | None = (5.0, 95.0), blocks: np.ndarray | None = None
) -> CounterfactualScores:
    """(n, T) quality and cost DR scores of every model on every row of ``data`` (module doc); ``clip``: the
    scores' utility clip (:class:`~regret_gateway.causal.estimators.CounterfactualScores`); ``blocks`` (n,):
    each row's block, pooled on its own (None: one block)."""
    q_hat, c_hat = np.asarray(data.quality_hat, dtype=np.float64), np.asarray(data.cost_hat, dtype=np.float64)
    w = pooled_weights(data, blocks)
    quality = q_hat + w * (np.asarray(data.quality, dtype=np.float64)[:, None] - q_hat)
    cost = c_hat + w * (np.asarray(data.cost, dtype=np.float64)[:, None] - c_hat)
    return CounterfactualScores(quality, cost, clip)


def pooled_weights(data: LoggedData, blocks: np.ndarray | None = None) -> np.ndarray:
    """(n, T) the weight of each row's correction in each model's pooled score: f_{s_i, a} 1[t_i = a] / p_i
    (module doc; 0 where the row's logged model is not a). Where these weights are few and heavy, a model's
    pooled value rests on a few rows (``retrain.checks``: its effective sample size)."""
    n, T = np.shape(data.quality_hat)
    scale = np.ones((n, T))
    if data.strata is not None and data.worst is not None and len(data.worst) > 1:
        S = len(data.worst)
        columns = [data.inverse_propensities(np.full(n, a)) for a in range(T)]
        inverse = np.stack([c for c in columns if c is not None], axis=1)  # one per model: the loggers are known
        labels = np.zeros(n, dtype=np.int64) if blocks is None else np.unique(blocks, return_inverse=True)[1].reshape(-1)
        for block in np.unique(labels):
            rows = np.flatnonzero(labels == block)
            strata = data.strata[rows]
            n_s = np.bincount(strata, minlength=S).astype(np.float64)
            present = n_s > 0
            for a in range(T):
                kappa = np.bincount(strata, inverse[rows, a], minlength=S)[present] / n_s[present]
                f = np.zeros(S)
                f[present] = (len(rows) / kappa) / (n_s[present] / kappa).sum()
                scale[rows, a] = f[strata]
    matched = (np.asarray(data.logged)[:, None] == np.arange(T)) / np.asarray(data.propensity, dtype=np.float64)[:, None]
    return matched * scale
