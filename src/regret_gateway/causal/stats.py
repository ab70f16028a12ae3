"""The formulas the nuisance stage and off-policy evaluation share, written once.

* importance weight   w_i = 1[t_i = t] / p(t_i | x_i)
* doubly robust term  r + c * w * (y - r)      (Dudik et al. 2011; c = 1 is DR, c = 0 the direct method)
* effective sample size  ESS = (sum_i w_i)^2 / sum_i w_i^2
* percentile bootstrap: resample rows with replacement, take the [alpha/2, 1 - alpha/2] percentiles.
"""

from __future__ import annotations

import numpy as np


def dr_term(predicted: np.ndarray, observed: np.ndarray, w: np.ndarray, correction: float = 1.0) -> np.ndarray:
    """predicted + correction * w * (observed - predicted), elementwise (broadcasts)."""
    return predicted + correction * w * (observed - predicted)


def effective_sample_size(w: np.ndarray) -> float:
    """(sum w)^2 / sum w^2; 0 when every weight is 0."""
    w = np.asarray(w, dtype=np.float64)
    total = w.sum()
    return float(total**2 / (w**2).sum()) if total > 0 else 0.0


def bootstrap_rows(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) row indices, each row one resample with replacement."""
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def percentile_interval(samples: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """The [alpha/2, 1 - alpha/2] percentiles of the finite ``samples`` (NaN, NaN when none is finite)."""
    finite = np.asarray(samples)[np.isfinite(samples)]
    if finite.size == 0:
        return float("nan"), float("nan")
    return float(np.percentile(finite, 100 * alpha / 2)), float(np.percentile(finite, 100 * (1 - alpha / 2)))
