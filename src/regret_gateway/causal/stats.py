"""The formulas the nuisance stage and off-policy evaluation share, written once.

* importance weight   w_i = 1[t_i = t] / p(t_i | x_i)
* doubly robust term  r + c * w * (y - r)      (Dudik et al. 2011; c = 1 is DR, c = 0 the direct method)
* effective sample size  ESS = (sum_i w_i)^2 / sum_i w_i^2
* bootstrap: resample prompts with replacement (every row of a drawn prompt comes along, so rows that
  share a prompt count as one draw); its percentile interval is regret_gateway/confidence.py's.
* prompts and folds: rows with the same feature vector are one prompt (:func:`prompt_groups`); folds
  never split a prompt (:func:`folds_of`), so no fit is scored on a prompt it was trained on; cross-fitting
  (the nuisance stage's and retrain's) takes its splits from :func:`cross_fit_splits`, which checks that.
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


def prompt_groups(X: np.ndarray) -> np.ndarray:
    """(n,) group ids in 0..G-1 of the rows of ``X`` (n, d): rows with identical features share one (the
    same prompt logged again, under any model)."""
    X = np.ascontiguousarray(X)
    if len(X) == 0:
        return np.zeros(0, dtype=np.int64)
    keys = X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).reshape(-1)
    return np.unique(keys, return_inverse=True)[1].reshape(-1).astype(np.int64)


def folds_of(n: int, k: int, seed: int, groups: np.ndarray | None = None) -> list[np.ndarray]:
    """``k`` seeded random folds of ``n`` rows, each sorted; with ``groups`` (n,) every group's rows fall in
    one fold (the groups are dealt out, sizes within one group of each other), else sizes within one row."""
    if groups is None:
        groups = np.arange(n)
    n_groups = int(groups.max()) + 1 if n else 0
    if not 2 <= k <= n_groups:
        raise ValueError(f"`folds` must be between 2 and the number of distinct prompts ({n_groups}), got {k}")
    fold_of_group = np.empty(n_groups, dtype=np.int64)
    for f, part in enumerate(np.array_split(np.random.default_rng(seed).permutation(n_groups), k)):
        fold_of_group[part] = f
    fold = fold_of_group[groups]
    return [np.flatnonzero(fold == f) for f in range(k)]


def cross_fit_splits(n: int, k: int, seed: int, groups: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cross-fitting's splits of ``n`` rows, one per fold of :func:`folds_of`: (held, rest), the fold a fit is
    scored on and the rows it is fitted on. Checked: the folds are disjoint and cover every row, and no
    prompt (``groups``) lies in two of them -- a fit scored on a prompt it saw would flatter itself."""
    folds = folds_of(n, k, seed, groups)
    everything = np.arange(n)
    if not np.array_equal(np.sort(np.concatenate(folds)), everything):
        raise RuntimeError("cross-fitting's folds must hold every row once")
    fold = np.empty(n, dtype=np.int64)
    for f, held in enumerate(folds):
        fold[held] = f
    if groups is not None and len(np.unique(groups * k + fold)) != len(np.unique(groups)):
        raise RuntimeError("cross-fitting's folds share a prompt")
    return [(held, np.setdiff1d(everything, held)) for held in folds]


def bootstrap_counts(n: int, n_boot: int, seed: int, groups: np.ndarray | None = None) -> np.ndarray:
    """(n_boot, n) how often each row is in each resample: prompts (``groups`` (n,), default one per row)
    drawn with replacement as many times as there are prompts, each drawn prompt bringing all its rows."""
    rng = np.random.default_rng(seed)
    if groups is None:
        drawn = rng.integers(0, n, size=(n_boot, n))
        return np.stack([np.bincount(d, minlength=n) for d in drawn]).astype(np.float64)
    n_groups = int(groups.max()) + 1
    drawn = rng.integers(0, n_groups, size=(n_boot, n_groups))
    return np.stack([np.bincount(d, minlength=n_groups)[groups] for d in drawn]).astype(np.float64)
