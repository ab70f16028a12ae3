"""Simulated observational logs from a full-feedback benchmark (the paper's protocol).

For each prompt one model is sampled from a logging policy P(t | x) and only its outcome is kept,
together with the exact propensity P(t_i | x_i); with ``draws`` = K, K independent draws per prompt.

Logging policies:

* ``accuracy-softmax`` (paper): P(t | x) = softmax_t(a_x(t) / temperature) -- better models on a prompt
  are logged more often (strong treatment bias, but it depends on the outcome).
* ``x-only``: P(t | x) = softmax_t(x W / temperature) with a fixed random W -- depends on the embedding
  only, so the propensity is exactly learnable from x.
* ``uniform``: P(t | x) = 1 / T (a randomised experiment).
"""

from __future__ import annotations

import numpy as np

from regret_gateway.data import FullFeedback, LoggedFeedback

LOGGING_POLICIES = ("accuracy-softmax", "x-only", "uniform")


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def logging_probabilities(
    full: FullFeedback, policy: str = "accuracy-softmax", *, temperature: float = 1.0, seed: int = 0
) -> np.ndarray:
    """(n, T) probabilities of the logging policy."""
    if policy not in LOGGING_POLICIES:
        raise ValueError(f"unknown logging policy '{policy}'; choose from {LOGGING_POLICIES}")
    if temperature <= 0:
        raise ValueError(f"`temperature` must be > 0, got {temperature}")
    n, T = full.n_samples, full.n_models
    if policy == "uniform":
        return np.full((n, T), 1.0 / T)
    if policy == "accuracy-softmax":
        return _softmax(full.quality / temperature)
    W = np.random.default_rng(seed).normal(size=(full.X.shape[1], T))
    logits = full.X.astype(np.float64) @ W
    logits /= logits.std() + 1e-12
    return _softmax(logits / temperature)


def simulate_logs(
    full: FullFeedback,
    *,
    policy: str = "accuracy-softmax",
    temperature: float = 1.0,
    seed: int = 0,
    draws: int = 1,
    eligible: np.ndarray | None = None,
) -> LoggedFeedback:
    """Sample one model per prompt from the logging policy; keep its outcome and exact propensity. With
    ``draws`` = K each prompt is logged K times, each an independent draw of the policy (K times the
    traffic from the same prompts): row j is prompt j // K. ``eligible`` (n, T): the models that can take
    each prompt (as the gateway draws): the policy renormalised over them, propensities exact over them."""
    if draws < 1:
        raise ValueError(f"`draws` must be >= 1, got {draws}")
    probs = logging_probabilities(full, policy, temperature=temperature, seed=seed)
    if eligible is not None:
        probs = np.where(eligible, probs, 0.0)
        probs /= probs.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(full.n_samples), draws)
    u = rng.random((full.n_samples, draws)).reshape(-1)[:, None]
    action = np.minimum((probs[rows].cumsum(axis=1) < u).sum(axis=1), full.n_models - 1)
    return LoggedFeedback(
        X=full.X[rows],
        action=action,
        quality=full.quality[rows, action],
        cost=full.cost[rows, action],
        model_names=full.model_names,
        propensity=probs[rows, action],
    )
