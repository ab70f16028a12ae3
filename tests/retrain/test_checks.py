"""Whether the logs can support a router: a model's effective sample size is that of the weights its value
rests on (retrain/checks.py)."""

import numpy as np
import pytest

from regret_gateway.data import FAVOURED_UNIFORM, LoggedFeedback
from regret_gateway.retrain import RetrainOptions, RetrainRefused, check_data


def _logs(seed: int = 0):
    """A cold start of 400 uniform draws over two models, then a router that favours model 0 on 5,000
    prompts and explores model 1 at p = 0.002: model 1 drawn on three of them (each weighs 500 at 1 / p)."""
    rng = np.random.default_rng(seed)
    cold, routed = 400, 5000
    action = np.concatenate([rng.integers(0, 2, cold), np.zeros(routed, dtype=np.int64)])
    action[cold + np.array([10, 2000, 4000])] = 1
    propensity = np.where(np.arange(cold + routed) < cold, 0.5, np.where(action == 1, 0.002, 0.998))
    n = cold + routed
    logged = LoggedFeedback(X=np.zeros((n, 3)), action=action, quality=rng.random(n), cost=np.full(n, 1e-3),
                            model_names=("a", "b"), propensity=propensity)  # fmt: skip
    loggers = (np.arange(n) >= cold).astype(np.int64)
    favoured = np.where(loggers == 0, FAVOURED_UNIFORM, 0)
    return logged, loggers, favoured


def test_a_few_rows_a_router_drew_at_a_tiny_propensity_do_not_refuse_what_the_cold_start_supports():
    """By 1 / p the three explored rows dominate model 1's ~200 uniform draws (an ESS below 10: refused);
    the gate weighs each logger's rows by what it knew of the model, so the pooled weights are even and the
    retrain goes on."""
    logged, loggers, favoured = _logs()
    opts = RetrainOptions()
    with pytest.raises(RetrainRefused, match=r"effective sample size too small for b"):
        check_data(logged, {}, opts)  # the loggers unknown: 1 / p
    info = check_data(logged, {}, opts, loggers=loggers, favoured=favoured)
    assert info["ess_per_model"]["b"] > 150


def test_a_model_only_a_router_explored_at_tiny_propensities_is_still_refused():
    """Without the cold start's draws nothing stands beside the three heavy rows: refused either way."""
    logged, loggers, favoured = _logs()
    rows = np.flatnonzero(loggers == 1)
    with pytest.raises(RetrainRefused, match=r"effective sample size too small for b"):
        check_data(logged.subset(rows), {}, RetrainOptions(min_rows_per_model=3), loggers=loggers[rows],
                   favoured=favoured[rows])  # fmt: skip
