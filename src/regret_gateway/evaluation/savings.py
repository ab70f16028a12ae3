"""Is the savings report right? Replays on full-feedback data, where every model's true outcome on every
logged request is known: the report's estimator (:func:`~regret_gateway.savings.alternatives.value_alternatives`)
on simulated logs, against the truth on the same requests (``regret-gateway bench savings``).

Per replay: ``n`` prompts drawn from the benchmark, each logged once by a logging policy with exact
propensities -- ``router-epsilon``, the gateway's way (each task's best model at the cost tie, found with
every outcome known, and uniform exploration at ``EPSILON``), or ``accuracy-softmax`` (the paper's: a
softmax of each prompt's true outcomes) -- and for every model the report's estimate of "served minus
every request to it", in quality and in dollars per request, with its 95% interval. The truth is the same
difference with the model's real outcome on each of those requests. Coverage is the share of intervals
that hold the truth (95% promised); bias the mean of estimate - truth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regret_gateway.data import FullFeedback
from regret_gateway.evaluation.simulation import logging_probabilities
from regret_gateway.savings.alternatives import value_alternatives

LOGGERS = ("router-epsilon", "accuracy-softmax")
EPSILON = 0.1  # the gateway's default share of uniform exploration (tiers' epsilon)


@dataclass(frozen=True)
class Check:
    """One alternative in one replay: the estimate, its interval and the truth, for the quality gap (served -
    alternative, x100 points) and the saving (alternative - served, USD per request)."""

    logger: str
    seed: int
    model: str
    quality_gap: float
    quality_ci: tuple[float, float]
    quality_truth: float
    saved: float
    saved_ci: tuple[float, float]
    saved_truth: float

    @property
    def quality_covered(self) -> bool:
        return self.quality_ci[0] <= self.quality_truth <= self.quality_ci[1]

    @property
    def saved_covered(self) -> bool:
        return self.saved_ci[0] <= self.saved_truth <= self.saved_ci[1]


def logging_policy(full: FullFeedback, logger: str, seed: int) -> np.ndarray:
    """(n, T) each prompt's logging probabilities under ``logger`` (module doc)."""
    if logger == "accuracy-softmax":
        return logging_probabilities(full, logger, seed=seed)
    if logger != "router-epsilon":
        raise ValueError(f"unknown logger {logger!r}; one of {', '.join(LOGGERS)}")
    T = full.n_models
    lam = float(np.mean(full.quality) / max(np.mean(full.cost), 1e-12))  # the cost tie: a dollar worth its quality
    utility = full.quality - lam * full.cost
    groups = full.groups if full.groups is not None else np.zeros(full.n_samples, dtype=object)
    probs = np.full((full.n_samples, T), EPSILON / T)
    for g in np.unique(groups):
        rows = groups == g
        probs[rows, int(np.argmax(utility[rows].mean(0)))] += 1.0 - EPSILON
    return probs


def check_estimates(full: FullFeedback, *, logger: str, seeds: list[int], n: int, n_boot: int = 300) -> list[Check]:
    """Every model's estimate against its truth in one replay per seed (module doc)."""
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        rows = np.sort(rng.choice(full.n_samples, size=min(n, full.n_samples), replace=False))
        world = full.subset(rows)
        probs = logging_policy(world, logger, seed)
        action = np.minimum((probs.cumsum(axis=1) < rng.random((len(rows), 1))).sum(axis=1), world.n_models - 1)
        index = np.arange(len(rows))
        quality, cost = world.quality[index, action], world.cost[index, action]
        served, alternatives = value_alternatives(world.model_names, action, quality, cost, probs[index, action],
                                                  n_boot=n_boot, seed=seed)  # fmt: skip
        for m, alt in enumerate(alternatives):
            if not alt.supported:
                continue
            out.append(Check(logger, seed, alt.model, 100 * alt.quality_gap, (100 * alt.quality_gap_ci[0], 100 * alt.quality_gap_ci[1]),
                             100 * (served.quality - world.quality[:, m].mean()), alt.saved, alt.saved_ci,
                             float(world.cost[:, m].mean() - served.cost)))  # fmt: skip
    return out


def summarize_checks(checks: list[Check]) -> dict[str, float]:
    """Coverage, bias and mean width of the quality gap's (x100 points) and the saving's (USD per 1,000
    requests) intervals over ``checks``."""
    if not checks:
        return {}
    q = np.array([[c.quality_gap - c.quality_truth, c.quality_ci[1] - c.quality_ci[0], c.quality_covered] for c in checks])
    s = np.array([[c.saved - c.saved_truth, c.saved_ci[1] - c.saved_ci[0], c.saved_covered] for c in checks]) * [1e3, 1e3, 1]
    return {
        "alternatives": len(checks),
        "quality_coverage": float(q[:, 2].mean()), "quality_bias": float(q[:, 0].mean()), "quality_width": float(q[:, 1].mean()),
        "saved_coverage": float(s[:, 2].mean()), "saved_bias_per_1k": float(s[:, 0].mean()), "saved_width_per_1k": float(s[:, 1].mean()),
    }  # fmt: skip
