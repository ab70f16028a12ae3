"""Per-row DR scores pooled over loggers: where the routers that logged most rows explored a model at a tiny
propensity, the cold start's corrections stand for their rows, and the model's mean score is its truth,
not the outcome model's guess."""

import numpy as np
import pytest

from regret_gateway.causal.ope import LoggedData
from regret_gateway.causal.pooling import pooled_scores
from regret_gateway.data import FAVOURED_UNIFORM


def _logs(seed: int, n: int = 5000, cold: int = 1000) -> LoggedData:
    """A cold start (uniform over three models) then a router that favours model 0 and explores 1 and 2 at
    0.001 each. True quality 0.5, 0.2, 0.4; the outcome model guesses 0.5, 0.8, 0.4 (optimistic on model 1)."""
    rng = np.random.default_rng(seed)
    first = np.arange(n) < cold
    probs = np.where(first[:, None], 1 / 3, np.array([0.998, 0.001, 0.001]))
    logged = (probs.cumsum(1) < rng.random(n)[:, None]).sum(1)
    quality = (rng.random(n) < np.array([0.5, 0.2, 0.4])[logged]).astype(float)
    q_hat = np.tile([0.5, 0.8, 0.4], (n, 1))
    return LoggedData(logged, quality, np.zeros(n), probs[np.arange(n), logged], q_hat, np.zeros((n, 3)),
                      strata=first.astype(int), favoured=np.where(first, FAVOURED_UNIFORM, 0))  # fmt: skip


def test_the_cold_start_s_corrections_stand_for_the_rows_of_routers_that_did_not_see_a_model():
    plain_errors, pooled_errors = [], []
    for seed in range(20):
        data = _logs(seed)
        pooled = pooled_scores(data).quality.mean(0)
        plain = (data.quality_hat + (data.logged[:, None] == np.arange(3)) / data.propensity[:, None]
                 * (data.quality[:, None] - data.quality_hat)).mean(0)  # fmt: skip
        plain_errors.append(abs(plain[1] - 0.2))
        pooled_errors.append(abs(pooled[1] - 0.2))
        # the model every logger saw keeps its score; the mean of the pooled scores is the gate's estimate
        assert pooled[0] == pytest.approx(0.5, abs=0.05)
        assert pooled[1] == pytest.approx(data.value(np.ones(len(data.logged), int), 0.0, n_boot=2).dr)
    assert np.median(pooled_errors) < 0.05 < np.median(plain_errors), (pooled_errors, plain_errors)


def test_with_one_logger_the_pooled_scores_are_the_plain_dr_scores():
    data = _logs(0, cold=5000)
    plain = data.quality_hat + (data.logged[:, None] == np.arange(3)) / data.propensity[:, None] * (
        data.quality[:, None] - data.quality_hat
    )
    one = LoggedData(data.logged, data.quality, data.cost, data.propensity, data.quality_hat, data.cost_hat)
    assert np.allclose(pooled_scores(one).quality, plain) and np.allclose(pooled_scores(data).quality, plain)


def test_pooled_by_block_each_block_s_mean_is_the_gate_s_estimate_on_its_rows():
    """Two regions whose rows the cold start logged in different shares (a fifth of one, half of the other):
    pooled by block, the mean of a model's scores over a region is what the gate's estimator says on that
    region's rows alone; pooled over all rows it is not."""
    data = _logs(1, n=6000, cold=2000)
    block = np.where(np.arange(6000) < 2000, np.arange(6000) % 5 == 0, np.arange(6000) % 2 == 0).astype(int)
    by_block, whole = pooled_scores(data, blocks=block).quality, pooled_scores(data).quality
    for b in (0, 1):
        rows = np.flatnonzero(block == b)
        gate = data.subset(rows).value(np.ones(len(rows), int), 0.0, n_boot=2).dr
        assert by_block[rows, 1].mean() == pytest.approx(gate)
        assert whole[rows, 1].mean() != pytest.approx(gate, abs=1e-3)


def _explored(seed: int, *, logged_distribution: bool) -> LoggedData:
    """A cold start of 90 rows (uniform over three models), then two router versions of 1,200 rows each that serve
    model 0 (0.90), explore their lead contender model 1 at 0.0975 on every request and model 2 at the floor
    (0.0025). True quality 0.45, 0.57, 0.30; the outcome model guesses 0.45 everywhere."""
    rng = np.random.default_rng(seed)
    n, cold = 2490, 90
    first = np.arange(n) < cold
    probs = np.where(first[:, None], 1 / 3, np.array([0.90, 0.0975, 0.0025]))
    logged = (probs.cumsum(1) < rng.random(n)[:, None]).sum(1)
    quality = (rng.random(n) < np.array([0.45, 0.57, 0.30])[logged]).astype(float)
    return LoggedData(logged, quality, np.zeros(n), probs[np.arange(n), logged], np.full((n, 3), 0.45), np.zeros((n, 3)),
                      strata=np.where(first, 0, 1 + (np.arange(n) - cold) // 1200), favoured=np.where(first, FAVOURED_UNIFORM, 0),
                      distributions=np.where(first[:, None], np.nan, probs) if logged_distribution else None)  # fmt: skip


def test_a_router_s_exploration_counts_as_much_as_the_distribution_it_logged():
    """Without the distribution a router drew from, its rows where the contender was not drawn count as its
    worst case (the floor, 1/0.0025): the ~230 rows it spent exploring the contender barely move the gate,
    which rests on the cold start's 30. With it, the contender's gain of +0.12 is proven in most draws."""
    found = {True: [], False: []}
    for seed in range(20):
        for logged_distribution in (True, False):
            data = _explored(seed, logged_distribution=logged_distribution)
            ones, zeros = np.ones(len(data.logged), int), np.zeros(len(data.logged), int)
            gain, (lo, hi) = data.gain(ones, zeros, 0.0, n_boot=200, alpha=0.025, seed=seed)
            found[logged_distribution].append((lo, hi))
    exact, worst = np.array(found[True]), np.array(found[False])
    assert np.sum(exact[:, 0] > 0) >= 17 and np.sum(worst[:, 0] > 0) <= 14, (exact, worst)  # proven better
    assert np.median(exact[:, 1] - exact[:, 0]) < 0.6 * np.median(worst[:, 1] - worst[:, 0])
    assert np.sum((exact[:, 0] <= 0.12) & (0.12 <= exact[:, 1])) >= 18  # and the intervals hold the truth
