"""Off-policy value of a deterministic routing policy on logged data: DR and SNIPS, bootstrap intervals,
effective sample size.

For logs (x_i, t_i, y_i, p_i) with y = a - lambda * c, a policy pi, and outcome models r_t(x):

    DR    = mean_i [ r_pi(x_i) + w_i (y_i - r_{t_i}(x_i)) ],   w_i = 1[t_i = pi(x_i)] / p_i
    SNIPS = sum_i w_i y_i / sum_i w_i
    ESS   = (sum_i w_i)^2 / sum_i w_i^2

Intervals: percentile bootstrap over rows (the same resamples for every quantity). Quality and cost are
estimated the same way, so a report can show what a policy would cost per 1,000 requests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


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


def _dr_terms(y: np.ndarray, r: np.ndarray, logged: np.ndarray, actions: np.ndarray, w: np.ndarray) -> np.ndarray:
    rows = np.arange(len(y))
    return r[rows, actions] + w * (y - r[rows, logged])


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
    y = quality - lam * cost
    r = quality_hat - lam * cost_hat
    dr_i = _dr_terms(y, r, logged, actions, w)
    q_i = _dr_terms(quality, quality_hat, logged, actions, w)
    c_i = _dr_terms(cost, cost_hat, logged, actions, w)
    rng = np.random.default_rng(seed)
    boot = rng.integers(0, n, size=(n_boot, n))
    dr_boot = dr_i[boot].mean(1)
    wb = w[boot]
    with np.errstate(invalid="ignore", divide="ignore"):
        snips_boot = (wb * y[boot]).sum(1) / wb.sum(1)
        snips = float((w * y).sum() / w.sum()) if w.sum() > 0 else float("nan")
    lo, hi = 100 * alpha / 2, 100 * (1 - alpha / 2)
    finite = snips_boot[np.isfinite(snips_boot)]
    return PolicyValue(
        dr=float(dr_i.mean()), dr_ci=(float(np.percentile(dr_boot, lo)), float(np.percentile(dr_boot, hi))),
        snips=snips, snips_ci=(float(np.percentile(finite, lo)), float(np.percentile(finite, hi))) if finite.size else (float("nan"),) * 2,
        quality=float(q_i.mean()), cost=float(c_i.mean()),
        ess=float(w.sum() ** 2 / (w ** 2).sum()) if w.sum() > 0 else 0.0, match_rate=float(match.mean()), n=n,
    )


def on_policy_value(quality: np.ndarray, cost: np.ndarray, lam: float, *, n_boot: int = 500, alpha: float = 0.05, seed: int = 0) -> PolicyValue:
    """Value of the policy that produced the logs themselves (a plain mean, with its bootstrap interval)."""
    y = quality - lam * cost
    n = len(y)
    boot = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    means = y[boot].mean(1)
    ci = (float(np.percentile(means, 100 * alpha / 2)), float(np.percentile(means, 100 * (1 - alpha / 2))))
    return PolicyValue(dr=float(y.mean()), dr_ci=ci, snips=float(y.mean()), snips_ci=ci, quality=float(quality.mean()),
                       cost=float(cost.mean()), ess=float(n), match_rate=1.0, n=n)
