"""What the requests a router served would have scored and cost had every one of them gone to one model:
the savings report's estimate (``regret-gateway report``), from the logs alone.

The served policy is on-policy: its quality and cost are the rows' own means. Each fixed alternative "every
request to model m" is valued off-policy with the gate's estimator (:class:`~regret_gateway.causal.ope.LoggedData`:
DR, each logger's correction weighted by what it knows, the bootstrap resampling prompts), with outcome
models that are each model's mean over the rows that logged it (quality and cost alike): the DR correction
of the rows that logged m, at weight 1/p, does the rest. The difference served - alternative is
bootstrapped on the same resampled prompts as both terms, so the noise they share cancels. An
alternative the logs cannot support -- a model logged on too few of these rows, in effective rows (Kish's,
of the weights 1/p: MIN_ESS) -- gets no number: the report says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regret_gateway.causal.ope import N_BOOT, LoggedData
from regret_gateway.causal.stats import effective_sample_size
from regret_gateway.confidence import ALPHA, percentile_interval

MIN_ESS = 30.0  # effective logged rows of a model before the report estimates "every request to it"


@dataclass(frozen=True)
class Alternative:
    """One fixed alternative on the served rows: its estimated mean ``quality`` and ``cost`` (USD per
    request), and the served policy's difference from it -- ``quality_gap`` = served - alternative (above 0:
    routing answered better) and ``saved`` = alternative - served per request (above 0: routing spent less),
    each with its 95% interval. ``supported`` False: too little evidence (``why``); the numbers are NaN."""

    model: str
    quality: float
    cost: float
    quality_gap: float
    quality_gap_ci: tuple[float, float]
    saved: float
    saved_ci: tuple[float, float]
    logged_rows: int
    ess: float
    supported: bool
    why: str | None = None


@dataclass(frozen=True)
class Served:
    """The served rows' own mean quality and cost (USD per request)."""

    quality: float
    cost: float
    rows: int


def value_alternatives(
    model_names: tuple[str, ...], logged: np.ndarray, quality: np.ndarray, cost: np.ndarray, propensity: np.ndarray,
    *, strata: np.ndarray | None = None, groups: np.ndarray | None = None, favoured: np.ndarray | None = None,
    distributions: np.ndarray | None = None, n_boot: int = N_BOOT, alpha: float = ALPHA, seed: int = 0, min_ess: float = MIN_ESS,
) -> tuple[Served, list[Alternative]]:  # fmt: skip
    """The served rows (``logged`` (n,) model indices, their ``quality``, ``cost`` and ``propensity``) and
    every model of ``model_names`` as a fixed alternative on them (module doc). ``strata``: each row's
    logger; ``groups``: each row's prompt (rows of one prompt are resampled together); ``favoured``: what
    each row's logger favoured there, ``distributions`` its logged distribution there
    (:class:`~regret_gateway.causal.ope.LoggedData`)."""
    logged = np.asarray(logged, dtype=np.int64)
    quality, cost = np.asarray(quality, dtype=np.float64), np.asarray(cost, dtype=np.float64)
    n, T = len(logged), len(model_names)
    counts = np.bincount(logged, minlength=T)
    q_mean = np.where(counts > 0, np.bincount(logged, quality, minlength=T) / np.maximum(counts, 1), quality.mean())
    c_mean = np.where(counts > 0, np.bincount(logged, cost, minlength=T) / np.maximum(counts, 1), cost.mean())
    data = LoggedData(logged, quality, cost, propensity, np.tile(q_mean, (n, 1)), np.tile(c_mean, (n, 1)),
                      strata=strata, groups=groups, favoured=favoured, distributions=distributions)  # fmt: skip
    boot = data.bootstrap(n_boot, seed)
    everything = np.ones((1, n))
    served_q, served_c = boot @ quality / boot.sum(1), boot @ cost / boot.sum(1)
    served = Served(float(quality.mean()), float(cost.mean()), n)
    out = []
    for m, name in enumerate(model_names):
        _, q, c = data.outcomes(np.full(n, m), 0.0)
        ess = effective_sample_size(q.w)
        if ess < min_ess:
            why = f"{name} answered {int(counts[m])} of these requests, {ess:.0f} effective: too few to estimate"
            nan = float("nan")
            out.append(Alternative(name, nan, nan, nan, (nan, nan), nan, (nan, nan), int(counts[m]), ess, False, why))
            continue
        q_hat, c_hat = float(q.dr(everything)[0]), float(c.dr(everything)[0])
        gap = percentile_interval(served_q - q.dr(boot), alpha)
        saved = percentile_interval(c.dr(boot) - served_c, alpha)
        out.append(Alternative(name, q_hat, c_hat, served.quality - q_hat, gap, c_hat - served.cost, saved,
                               int(counts[m]), ess, True))  # fmt: skip
    return served, out
