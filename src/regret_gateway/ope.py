"""Off-policy value of a deterministic routing policy on logged data: DR and SNIPS, bootstrap intervals,
effective sample size.

For logs (x_i, t_i, y_i, p_i) with y = a - lambda * c, a policy pi, and outcome models r_t(x):

    DR    = mean_i [ r_pi(x_i) + w_i (y_i - r_pi(x_i)) ],   w_i = 1[t_i = pi(x_i)] / p_i
    SNIPS = sum_i w_i y_i / sum_i w_i
    ESS   = (sum_i w_i)^2 / sum_i w_i^2

(where w_i > 0 the logged model is pi's choice, so r_{t_i} = r_pi). The estimators share one base
(Open Bandit Pipeline's layout): a subclass implements :meth:`OffPolicyEstimator._values`, the estimate
on each of a batch of row resamples; the point estimate is the full sample, the interval the percentile
bootstrap over the same resamples for every estimator. The formulas are those of
:mod:`regret_gateway.causal.stats`, shared with the nuisance stage. The logging policy's own value is DR
with w = 1 and r = 0: the plain mean of the logged utilities.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from regret_gateway.causal.stats import bootstrap_rows, dr_term, effective_sample_size, percentile_interval


@dataclass(frozen=True)
class PolicyValue:
    dr: float
    dr_ci: tuple[float, float]
    snips: float
    snips_ci: tuple[float, float]
    quality: float  # DR estimate of mean quality
    cost: float  # DR estimate of mean cost (USD per request)
    ess: float
    match_rate: float  # share of logged rows where the logged model is the policy's choice
    n: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LoggedOutcomes:
    """Per logged row: observed outcome ``y`` (n,), the outcome model's value of the policy's choice
    ``r`` (n,), and the importance weight ``w`` (n,) of that choice."""

    y: np.ndarray
    r: np.ndarray
    w: np.ndarray


class OffPolicyEstimator:
    """Base: ``estimate(d)`` is :meth:`_values` on all rows; ``interval(d, rows)`` on bootstrap resamples."""

    name = "base"

    def _values(self, d: LoggedOutcomes, rows: np.ndarray) -> np.ndarray:
        """(B,) estimate on each resample; ``rows`` is (B, n) row indices."""
        raise NotImplementedError

    def estimate(self, d: LoggedOutcomes) -> float:
        return float(self._values(d, np.arange(len(d.y))[None, :])[0])

    def interval(self, d: LoggedOutcomes, rows: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
        return percentile_interval(self._values(d, rows), alpha)


class DoublyRobustOPE(OffPolicyEstimator):
    name = "dr"

    def _values(self, d, rows):
        return dr_term(d.r, d.y, d.w)[rows].mean(1)


class SelfNormalizedIPS(OffPolicyEstimator):
    name = "snips"

    def _values(self, d, rows):
        w = d.w[rows]
        with np.errstate(invalid="ignore", divide="ignore"):
            return (w * d.y[rows]).sum(1) / w.sum(1)


DR, SNIPS = DoublyRobustOPE(), SelfNormalizedIPS()


def policy_value(
    actions: np.ndarray,
    *,
    logged: np.ndarray,
    quality: np.ndarray,
    cost: np.ndarray,
    propensity: np.ndarray,
    quality_hat: np.ndarray,
    cost_hat: np.ndarray,
    lam: float,
    n_boot: int = 500,
    alpha: float = 0.05,
    seed: int = 0,
) -> PolicyValue:
    """Value of the policy that chose ``actions`` (n,) on logs (``logged`` actions, observed ``quality``
    and ``cost``, logging ``propensity``), with outcome models ``quality_hat``/``cost_hat`` (n, T) fitted
    on other rows."""
    actions, logged = np.asarray(actions), np.asarray(logged)
    n = len(actions)
    if n == 0:
        raise ValueError("cannot evaluate a policy on 0 rows")
    p = np.asarray(propensity, dtype=np.float64)
    if p.min() <= 0 or p.max() > 1:
        raise ValueError(f"`propensity` must be in (0, 1], got min={p.min():.6g}, max={p.max():.6g}")
    match = actions == logged
    w = match / p
    rows = np.arange(n)
    q_hat, c_hat = quality_hat[rows, actions], cost_hat[rows, actions]
    utility = LoggedOutcomes(quality - lam * cost, q_hat - lam * c_hat, w)
    boot = bootstrap_rows(n, n_boot, seed)
    return PolicyValue(
        dr=DR.estimate(utility),
        dr_ci=DR.interval(utility, boot, alpha),
        snips=SNIPS.estimate(utility) if w.sum() > 0 else float("nan"),
        snips_ci=SNIPS.interval(utility, boot, alpha),
        quality=DR.estimate(LoggedOutcomes(quality, q_hat, w)),
        cost=DR.estimate(LoggedOutcomes(cost, c_hat, w)),
        ess=effective_sample_size(w),
        match_rate=float(match.mean()),
        n=n,
    )


def on_policy_value(
    quality: np.ndarray, cost: np.ndarray, lam: float, *, n_boot: int = 500, alpha: float = 0.05, seed: int = 0
) -> PolicyValue:
    """Value of the policy that produced the logs themselves (a plain mean, with its bootstrap interval)."""
    n = len(quality)
    ones, zeros = np.ones(n), np.zeros(n)
    utility = LoggedOutcomes(quality - lam * cost, zeros, ones)
    value, ci = DR.estimate(utility), DR.interval(utility, bootstrap_rows(n, n_boot, seed), alpha)
    return PolicyValue(
        dr=value,
        dr_ci=ci,
        snips=value,
        snips_ci=ci,
        quality=float(np.mean(quality)),
        cost=float(np.mean(cost)),
        ess=float(n),
        match_rate=1.0,
        n=n,
    )
