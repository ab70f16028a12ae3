"""Training objectives of the routers. Shapes: logits/pred (M, n, T); targets (M, n, T) or (n, T).

* softmax regret (RM-Softmax): mean_i [ max_t Y_i(t) - sum_t Y_i(t) softmax(tau * f(x_i))_t ]
  ``tau`` is the sharpness (inverse temperature): as tau -> inf the softmax becomes the argmax and the
  loss becomes the regret of the deterministic policy.
* classification (RM-Classification, Full-Feedback): cross-entropy to (soft) argmax labels.
* regression (CF-Regression): mean squared error to the scores.
"""

from __future__ import annotations

import numpy as np
import torch

TIE_RULES = ("share", "cheapest", "first")


def softmax_regret(logits: torch.Tensor, Y: torch.Tensor, tau: float) -> torch.Tensor:
    """(M,) mean softmax-weighted regret."""
    weights = torch.softmax(tau * logits, dim=-1)
    return (Y.max(dim=-1).values - (weights * Y).sum(-1)).mean(-1)


def classification(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(M,) cross-entropy to soft labels (rows summing to 1)."""
    return -(labels * torch.log_softmax(logits, dim=-1)).sum(-1).mean(-1)


def regression(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(M,) mean squared error."""
    return ((pred - target) ** 2).mean(dim=(-1, -2))


def regret(Y: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """(M,) regret of the argmax policy: mean_i [max_t Y_i(t) - Y_i(argmax_t f(x_i))]."""
    if Y.dim() == 2:
        Y = Y.unsqueeze(0).expand(logits.shape[0], -1, -1)
    chosen = Y.gather(-1, logits.argmax(-1, keepdim=True)).squeeze(-1)
    return (Y.max(-1).values - chosen).mean(-1)


def argmax_labels(Y: np.ndarray, *, ties: str = "share", cost: np.ndarray | None = None, tol: float = 1e-9) -> np.ndarray:
    """(n, T) labels for argmax_t Y_i(t), aware of ties.

    98% of RouterBench prompts have several correct models, so a hard argmax silently labels the first
    column. ``ties``:

    * ``"share"`` (default): the label mass is split evenly among the models within ``tol`` of the max;
    * ``"cheapest"``: the tie goes to the tied model with the lowest ``cost`` (needs ``cost`` (n, T));
    * ``"first"``: numpy's argmax (the first column), for comparison only.
    """
    if ties not in TIE_RULES:
        raise ValueError(f"`ties` must be one of {TIE_RULES}, got {ties!r}")
    Y = np.asarray(Y, dtype=np.float64)
    n, T = Y.shape
    if ties == "first":
        labels = np.zeros((n, T))
        labels[np.arange(n), Y.argmax(1)] = 1.0
        return labels
    tied = Y >= Y.max(axis=1, keepdims=True) - tol
    if ties == "share":
        return tied / tied.sum(axis=1, keepdims=True)
    if cost is None or np.shape(cost) != (n, T):
        raise ValueError("`ties='cheapest'` needs `cost` with the shape of `Y`")
    masked = np.where(tied, cost, np.inf)
    labels = np.zeros((n, T))
    labels[np.arange(n), masked.argmin(1)] = 1.0
    return labels
