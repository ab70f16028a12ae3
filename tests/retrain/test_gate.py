"""The gate's contenders: the models a tier's logs cannot show to be worse than what it serves, which its
exploration then spends on (gateway/exploration.py)."""

import numpy as np
import pytest

from regret_gateway.causal.ope import LoggedData
from regret_gateway.retrain.gate import contenders
from regret_gateway.servable import Candidate, ConstantPolicy, PublishedRouter, ServedTier

NAMES = ("served", "worse", "alike", "rare")


def _logs(n: int, seed: int, cost: float = 0.0, logger=(0.97, 0.01, 0.01, 0.01), rare: float = 0.58) -> LoggedData:
    """``n`` rows: a cold start (a quarter of the rows, uniform over the four models), then a logger that
    draws the models with the probabilities ``logger`` (default: serves ``served``, explores the others at
    1% each). True quality: served 0.6, worse 0.2, alike 0.6, rare ``rare``; ``alike`` costs ``cost`` a request."""
    rng = np.random.default_rng(seed)
    cold = np.arange(n) < n // 4
    probs = np.where(cold[:, None], 0.25, np.array(logger))
    logged = np.array([rng.choice(4, p=p) for p in probs])
    quality = (rng.random(n) < np.array([0.6, 0.2, 0.6, rare])[logged]).astype(float)
    favoured = np.where(cold, -2, 0)  # data.FAVOURED_UNIFORM, then the served model
    return LoggedData(logged, quality, np.where(logged == 2, cost, 0.0), probs[np.arange(n), logged],
                      np.full((n, 4), 0.5), np.tile([0.0, 0.0, cost, 0.0], (n, 1)), strata=cold.astype(int),
                      favoured=favoured)  # fmt: skip


def test_a_model_the_logs_show_worse_is_dismissed_and_the_others_contend():
    data = _logs(4000, seed=0)
    served = np.zeros(4000, dtype=int)
    assert set(contenders(data, served, 0.0, NAMES, n_boot=200)) == {"alike", "rare"}
    # a price makes "alike" worse at a lambda that weighs it: dismissed there
    assert contenders(_logs(4000, seed=0, cost=0.002), served, 200.0, NAMES, n_boot=200) == ("rare",)
    # a router that serves "alike" on some rows still has it as a contender; one that serves it everywhere does not
    assert "alike" in contenders(data, np.arange(4000) % 3 // 2 * 2, 0.0, NAMES, n_boot=200)
    assert "alike" not in contenders(data, np.full(4000, 2), 0.0, NAMES, n_boot=200)


def test_the_contender_the_logs_could_most_be_wrong_about_leads():
    """Two contenders as good as the served model: ``alike`` explored at 8%, ``rare`` at 1%. The rarely
    logged one's gain has the wider interval, so the higher upper end: it leads (exploration spends on it),
    and the order is the upper ends' order. A model that is better by more leads whatever its rows."""
    served = np.zeros(4000, dtype=int)
    data = _logs(4000, seed=1, logger=(0.90, 0.01, 0.08, 0.01), rare=0.6)
    rivals = contenders(data, served, 0.0, NAMES, n_boot=200)
    assert rivals == ("rare", "alike")
    upper = data.gains({n: np.full(4000, NAMES.index(n)) for n in rivals}, served, 0.0, n_boot=200, alpha=0.05 / 3)
    assert upper["rare"][1][1] > upper["alike"][1][1] > 0
    better = _logs(4000, seed=1, logger=(0.60, 0.01, 0.38, 0.01), rare=0.75)
    assert contenders(better, served, 0.0, NAMES, n_boot=200)[0] == "rare"


def test_a_published_tier_s_contenders_must_be_its_models():
    tier = ServedTier(0.0, Candidate("constant", "served"), ConstantPolicy(NAMES, "served"), ("nope",))
    with pytest.raises(ValueError, match="contenders must be models the router routes over"):
        PublishedRouter({"t": tier})
