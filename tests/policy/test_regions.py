"""The safe regional default: it departs from the best constant model only in regions of prompt space
whose logs prove another model better there, which pays on prompts it never saw; where the prompt does
not matter it stays the constant; a prompt logged many times is one unit of evidence, not many."""

import numpy as np
import pytest

from regret_gateway.causal.estimators import DoublyRobust, Nuisance
from regret_gateway.causal.outcome import OutcomeModel
from regret_gateway.causal.propensity import LoggedPropensity
from regret_gateway.causal.stats import bootstrap_counts, folds_of, prompt_groups
from regret_gateway.data import FullFeedback
from regret_gateway.evaluation.offline import evaluate_actions
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.nn.training import TrainConfig
from regret_gateway.policy.regions import choose_regions, fit_regions, region_policy
from regret_gateway.servable import from_state
from tests.policy.test_cluster import task_world

LAMBDAS = [0.0, 100.0]


def _safe_policies(world: FullFeedback, n_train: int, draws: int, seed: int = 0):
    """Per lambda: the regional policy learned from ``draws`` uniform logs of each of the first ``n_train``
    prompts (out-of-fold DR scores, two folds), and the best constant it departs from."""
    logs = simulate_logs(world.subset(np.arange(n_train)), policy="uniform", seed=seed, draws=draws)
    nuisance = Nuisance(propensity=LoggedPropensity(), outcome=OutcomeModel(train=TrainConfig(max_epochs=60)),
                        estimator=DoublyRobust(clip=None), nuisance_folds=2, random_state=seed)  # fmt: skip
    scores = nuisance.fit_scores(logs)
    groups = prompt_groups(logs.X)
    regions = fit_regions(logs.X, groups, rows_per_region=500, min_prompts_per_region=100, seed=seed)
    folds = folds_of(logs.n_samples, 5, seed, groups)  # each fold's challengers proposed by the other folds
    out = []
    for lam in LAMBDAS:
        b = scores.best_constant(lam)
        choice = choose_regions(scores.quality, scores.cost, logs.action, regions, groups, b, lam, folds=folds, aggregate=True)
        out.append((region_policy(world.model_names, regions, choice), choice))
    return out


def _test_utility(world: FullFeedback, test: np.ndarray, actions: list[np.ndarray]) -> np.ndarray:
    return evaluate_actions(world.subset(test), LAMBDAS, np.stack(actions))["utility"]


@pytest.mark.slow
def test_regions_depart_where_the_logs_prove_a_gain_and_it_pays_on_unseen_prompts():
    world = task_world(n=3000, tasks=6, seed=1)
    test = np.arange(1500, 3000)  # never logged
    safe = _safe_policies(world, 1500, draws=5)
    assert all(choice.n_adopted >= 2 for _, choice in safe), [c.n_adopted for _, c in safe]
    learned = _test_utility(world, test, [p.choose(world.X[test], lam) for (p, _), lam in zip(safe, LAMBDAS)])
    constant = _test_utility(world, test, [np.full(len(test), c.baseline) for _, c in safe])
    assert (learned > constant + 3).all(), (learned, constant)  # x100 utility on prompts it never saw
    # every departing region gained on its own rows under the challenger the other folds proposed, and the
    # policy survives its round trip
    for policy, choice in safe:
        assert (choice.gain[choice.adopted] > 0).all()
        again = from_state(policy.state())
        assert np.array_equal(again.choose(world.X, 0.0), policy.choose(world.X, 0.0))


@pytest.mark.slow
def test_where_the_prompt_does_not_matter_no_region_departs():
    world = task_world(n=3000, tasks=6, seed=1, prompt_matters=False)
    for policy, choice in _safe_policies(world, 1500, draws=5):
        assert choice.n_adopted == 0, choice.describe(world.model_names)
        assert (policy.choose(world.X, 0.0) == choice.baseline).all()


def _scores_one_region_gains(n_prompts: int, gain: float, seed: int = 0):
    """DR-like scores of two models on ``n_prompts`` prompts: model 1 better than model 0 by ``gain`` on
    average, with unit noise per prompt."""
    rng = np.random.default_rng(seed)
    q0 = rng.normal(0.5, 0.5, n_prompts)
    q1 = q0 + gain + rng.normal(0.0, 1.0, n_prompts)
    quality = np.stack([q0, q1], axis=1)
    X = rng.normal(size=(n_prompts, 4)).astype(np.float32)
    return X, quality, np.zeros_like(quality), rng.integers(0, 2, n_prompts)


def test_a_prompt_logged_again_with_the_same_outcome_is_not_more_evidence():
    X, quality, cost, logged = _scores_one_region_gains(400, gain=0.12)
    regions = fit_regions(X, prompt_groups(X), rows_per_region=200, min_prompts_per_region=200, seed=0)  # two regions
    once = choose_regions(quality, cost, logged, regions, prompt_groups(X), 0, 0.0)
    rows = np.repeat(np.arange(len(X)), 4)  # every row four times: the same prompt, action and outcome
    again = fit_regions(X[rows], prompt_groups(X[rows]), rows_per_region=800, min_prompts_per_region=200, seed=0)
    four = choose_regions(quality[rows], cost[rows], logged[rows], again, prompt_groups(X[rows]), 0, 0.0)
    np.testing.assert_allclose(four.lower, once.lower)  # the bound is clustered by prompt
    assert np.array_equal(four.adopted, once.adopted)


def test_folds_and_bootstrap_keep_a_prompt_together():
    groups = np.repeat(np.arange(50), 3)[np.random.default_rng(0).permutation(150)]
    folds = folds_of(150, 5, seed=1, groups=groups)
    assert sorted(np.concatenate(folds).tolist()) == list(range(150))
    assert all(len(set(groups[f]) & set(groups[g])) == 0 for i, f in enumerate(folds) for g in folds[i + 1 :])
    counts = bootstrap_counts(150, 20, seed=0, groups=groups)
    for g in range(50):  # the rows of one prompt are drawn together, as often as the prompt
        assert (counts[:, groups == g] == counts[:, groups == g][:, :1]).all()
    assert np.allclose(counts.sum(1), 150)  # 50 prompts drawn, three rows each
