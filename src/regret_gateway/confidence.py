"""Is X confidently better than Y: the one home of the tests that decide it, shared by the gate (what a
tier serves: causal/selection.py ``select``), the regions (policy/regions.py), the budget frontier
(retrain/frontier.py) and the trust check (trust.py).

* ``ALPHA``: every such decision is wrong at most this often, over the whole family of comparisons it
  makes (:func:`family_alpha`: Bonferroni -- the best of several challengers is the one its noise
  flattered most, so each is tested at ``alpha / comparisons``);
* from bootstrap resamples of a difference (the gate, the frontier): its percentile interval
  (:func:`percentile_interval`), confident where its lower end clears what is required
  (:func:`confidently_above`);
* from a mean and its standard error (the regions' clustered one; the trust check's pooled two-sample
  one): the normal quantile (:func:`z_critical`) or p-value (:func:`p_value`), and Holm's step-down over a
  family tested one by one (:func:`holm`, each acceptance's level :func:`holm_levels`);
* what a published claim says (:func:`selective_lower`, :func:`selective_interval`): a gain is published only
  because its bound passed a test on the same rows, and a bound that has just passed is, on average, too
  high -- the claims that pass are the ones the noise flattered (the winner's curse). In keyed simulated
  worlds where a departure gains a little, the regions' plain one-sided bound held the true gain in 17 of
  23 published claims (docs/experiments/platform-replay.md, "Claims that hold"). The published bound is the
  one conditional on having passed: the estimate's normal distribution truncated at the test's threshold
  (Fithian, Sun and Taylor, 2014; Lee, Sun, Sun and Taylor, 2016), which holds at its level among the
  published claims themselves.

The estimates themselves -- which rows, which weights -- are the callers'; causal/ope.py's logger
weighting is what makes the bootstrap's differences honest for the gate and the frontier.
"""

from __future__ import annotations

import math
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
    levels = holm_levels(p, alpha)
    accepted = np.zeros(len(p), dtype=bool)
    for i in np.argsort(p, kind="stable"):
        if p[i] > levels[i] or (ahead is not None and not ahead[i]):
            break
        accepted[i] = True
    return accepted


def holm_levels(p_values: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """(k,) the level Holm's step-down tests each of ``p_values`` at: the j-th smallest at ``alpha / (k - j)``."""
    p = np.asarray(p_values, dtype=np.float64)
    levels = np.empty(len(p))
    levels[np.argsort(p, kind="stable")] = alpha / (len(p) - np.arange(len(p)))
    return levels


SELECTIVE_FLOOR = 30.0  # a selective bound lies at most this many standard errors below its estimate


def selective_lower(estimate: float, se: float, passed_at: float, alpha: float = ALPHA) -> float:
    """The one-sided ``1 - alpha`` lower bound of a mean ``estimate`` (standard error ``se``) published because
    ``estimate / se`` passed the z threshold ``passed_at``, conditional on having passed (module doc): the
    mean mu under which a normal N(mu, se^2), truncated below at ``passed_at * se``, puts ``alpha`` above
    ``estimate``. Just past the threshold it lies far below the estimate (the pass says little); far past
    it, it is the plain ``estimate - z se``. At most ``SELECTIVE_FLOOR`` standard errors below."""
    return _truncated_mean(estimate, se, passed_at * se, alpha)


def selective_interval(estimate: float, se: float, passed_at: float, alpha: float = ALPHA) -> tuple[float, float]:
    """The two-sided ``1 - alpha`` interval of ``estimate`` conditional on ``estimate`` having passed
    ``passed_at`` (an absolute threshold, in the estimate's units: the gate publishes a gain whose
    interval's lower end cleared what it required), as :func:`selective_lower` at each end."""
    return _truncated_mean(estimate, se, passed_at, alpha / 2), _truncated_mean(estimate, se, passed_at, 1 - alpha / 2)


def _truncated_mean(t: float, se: float, c: float, level: float) -> float:
    """The mu with P(T > t | T > c) = ``level`` for T ~ N(mu, se^2): the probability rises with mu, so
    bisection on [t - SELECTIVE_FLOOR se, t + SELECTIVE_FLOOR se]."""
    if not (se > 0 and math.isfinite(t)):
        return t
    if c >= t:  # passed by nothing: the pass says nothing about mu
        return t - SELECTIVE_FLOOR * se if level < 0.5 else t + SELECTIVE_FLOOR * se

    def log_sf(x: float) -> float:
        return math.log(max(0.5 * math.erfc(x / math.sqrt(2.0)), 1e-300))

    lo, hi = t - SELECTIVE_FLOOR * se, t + SELECTIVE_FLOOR * se
    for _ in range(100):
        mu = (lo + hi) / 2
        if log_sf((t - mu) / se) - log_sf((c - mu) / se) < math.log(level):
            lo = mu
        else:
            hi = mu
    return (lo + hi) / 2
