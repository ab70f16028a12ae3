"""The tiers' ladder retrain publishes flags a rung that another, costing no more, beats with confidence
(or serves exactly, further down): a point estimate is not enough."""

from __future__ import annotations

import numpy as np

from regret_gateway.budgets.ladder import CHEAPEST, Rung
from regret_gateway.causal.ope import DR, LoggedData
from regret_gateway.retrain.frontier import flag_dominated

COST = np.array([0.010, 0.005, 0.001])  # dear, mid, cheap


def logs(quality: list[float], n: int, seed: int, cost: np.ndarray = COST) -> LoggedData:
    """``n`` requests logged uniformly over three models whose answers pass with ``quality`` and cost
    ``cost``; an outcome model that knows nothing (0.5 everywhere)."""
    rng = np.random.default_rng(seed)
    logged = rng.integers(0, 3, n)
    passed = (rng.random(n) < np.asarray(quality)[logged]).astype(float)
    return LoggedData(logged, passed, cost[logged], np.full(n, 1 / 3), np.full((n, 3), 0.5), np.tile(cost, (n, 1)))


def ladder_of(data: LoggedData, choices: list[int]) -> tuple[list[Rung], list[np.ndarray]]:
    names = ["premium", "standard", "economy", ""]
    actions = [np.full(len(data.logged), c) for c in choices]
    rungs = []
    for name, a in zip(names, actions):
        _, quality, cost = data.outcomes(a, 0.0)
        rungs.append(Rung("tier" if name else CHEAPEST, name, 0.0, DR.estimate(cost), DR.estimate(quality)))
    return rungs, actions


def test_a_dearer_tier_is_flagged_only_where_a_cheaper_rung_is_confidently_better():
    # premium serves the dear model, 10 points worse than the mid model standard and economy both serve
    data = logs([0.60, 0.70, 0.50], 6000, seed=0)
    rungs, actions = ladder_of(data, [0, 1, 1, 2])
    flags = [r.dominated for r in flag_dominated(rungs, actions, data, n_boot=300)]
    # premium: beaten with confidence; standard: economy serves the same, further down; the cheapest: kept
    assert flags == [True, True, False, False]
    # a point behind, within the noise: the dearer tier stays, though its estimate is the lower one
    data = logs([0.69, 0.70, 0.50], 3000, seed=1)
    rungs, actions = ladder_of(data, [0, 1, 2, 2])
    assert rungs[0].quality < rungs[1].quality  # what a rule on point estimates would drop it for
    assert [r.dominated for r in flag_dominated(rungs, actions, data, n_boot=300)] == [False, False, True, False]


def test_a_tier_a_mix_of_two_others_confidently_beats_at_its_cost_is_flagged():
    """Premium's model costs a hair less than standard's and answers 10 points worse: no single rung that
    costs no more beats it, but the mix of standard and economy that costs what premium does is confidently
    better, so premium is flagged; standard, above that mix's reach, stays."""
    data = logs([0.60, 0.70, 0.50], 6000, seed=2, cost=np.array([0.00499, 0.00500, 0.001]))
    rungs, actions = ladder_of(data, [0, 1, 2, 2])
    assert rungs[0].usd < rungs[1].usd
    assert [r.dominated for r in flag_dominated(rungs, actions, data, n_boot=300)] == [True, False, True, False]
