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
