"""Is X confidently better than Y: the one home of the tests that decide it, shared by the gate (what a
tier serves: causal/ope.py ``select``), the regions (policy/regions.py), the budget frontier
(retrain/frontier.py) and the trust check (trust.py).

* ``ALPHA``: every such decision is wrong at most this often, over the whole family of comparisons it
  makes (:func:`family_alpha`: Bonferroni -- the best of several challengers is the one its noise
  flattered most, so each is tested at ``alpha / comparisons``);
* from bootstrap resamples of a difference (the gate, the frontier): its percentile interval
  (:func:`percentile_interval`), confident where its lower end clears what is required
  (:func:`confidently_above`);
* from a mean and its standard error (the regions' clustered one; the trust check's pooled two-sample
  one): the normal quantile (:func:`z_critical`) or p-value (:func:`p_value`), and Holm's step-down over a
  family tested one by one (:func:`holm`).

The estimates themselves -- which rows, which weights -- are the callers'; causal/ope.py's logger
weighting is what makes the bootstrap's differences honest for the gate and the frontier.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

ALPHA = 0.05  # every confident decision's family-wise error (two-sided intervals at 1 - ALPHA)


def family_alpha(alpha: float, comparisons: int) -> float:
    """Each of ``comparisons`` tests' share of ``alpha`` (Bonferroni; at least one comparison)."""
    return alpha / max(1, comparisons)


def percentile_interval(samples: np.ndarray, alpha: float = ALPHA) -> tuple[float, float]:
    """The [alpha/2, 1 - alpha/2] percentiles of the finite ``samples`` (NaN, NaN when none is finite)."""
    finite = np.asarray(samples)[np.isfinite(samples)]
    if finite.size == 0:
        return float("nan"), float("nan")
    return float(np.percentile(finite, 100 * alpha / 2)), float(np.percentile(finite, 100 * (1 - alpha / 2)))


def confidently_above(samples: np.ndarray, required: float = 0.0, alpha: float = ALPHA) -> bool:
    """Whether the lower end of the percentile interval of ``samples`` (bootstrap resamples of a difference)
    at ``alpha`` is above ``required``."""
    return bool(percentile_interval(samples, alpha)[0] > required)


def z_critical(alpha: float = ALPHA, comparisons: int = 1, *, two_sided: bool = False) -> float:
    """The normal quantile a z statistic must pass for a confident difference, one of ``comparisons``."""
    share = family_alpha(alpha, comparisons)
    return NormalDist().inv_cdf(1.0 - (share / 2 if two_sided else share))


def p_value(z: float) -> float:
    """The one-sided p-value of a z statistic (that the difference is not above 0)."""
    return 1.0 - NormalDist().cdf(z)


def holm(p_values: np.ndarray, alpha: float = ALPHA, ahead: np.ndarray | None = None) -> np.ndarray:
    """(k,) which of ``p_values`` Holm's step-down accepts at family-wise ``alpha``: smallest first, the j-th
    at ``alpha / (k - j)``, stopping at the first that fails -- or, with ``ahead`` (k,) bool, at the first
    whose difference is not ahead at all."""
    p = np.asarray(p_values, dtype=np.float64)
    accepted = np.zeros(len(p), dtype=bool)
    for j, i in enumerate(np.argsort(p, kind="stable")):
        if p[i] > alpha / (len(p) - j) or (ahead is not None and not ahead[i]):
            break
        accepted[i] = True
    return accepted
