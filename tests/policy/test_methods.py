"""A learned policy must beat naive ones where the truth is known."""

import numpy as np
import pytest

from regret_gateway.causal.estimators import DoublyRobust, Nuisance
from regret_gateway.causal.outcome import OutcomeModel
from regret_gateway.causal.propensity import LoggedPropensity
from regret_gateway.evaluation.offline import evaluate_actions, reference_actions
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.nn.training import TrainConfig
from regret_gateway.policy.learner import fit_training_data
from regret_gateway.policy.registry import make_router, method_names, router_class
from regret_gateway.policy.router import TrainingData
from tests.conftest import make_world

FAST = TrainConfig(max_epochs=300, patience=30)
LAMBDAS = [0.0, 100.0, 200.0]


@pytest.fixture(scope="module")
def setting():
    world = make_world(n=3000, seed=7)
    train, val, test = world.subset(np.arange(0, 2000)), world.subset(np.arange(2000, 2400)), world.subset(np.arange(2400, 3000))
    logs = simulate_logs(world.subset(np.arange(0, 2400)), policy="accuracy-softmax", seed=7)
    tr, va = logs.subset(np.arange(2000)), logs.subset(np.arange(2000, 2400))
    nuisance = Nuisance(
        propensity=LoggedPropensity(), outcome=OutcomeModel(train=FAST), estimator=DoublyRobust(clip_scope="global")
    )
    data = fit_training_data(nuisance, tr, va)
    return data, train, test, TrainingData.from_full(train, val)


def _utility(test, actions):
    return evaluate_actions(test, LAMBDAS, actions)["utility"]


@pytest.mark.slow
def test_rm_softmax_beats_uniform_single_best_and_naive(setting):
    data, train, test, _ = setting
    rm = make_router("rm-softmax", train=FAST, hidden=(64, 64)).fit(data, LAMBDAS)
    learned = _utility(test, rm.predict(test.X, LAMBDAS))
    rng = np.random.default_rng(0)
    uniform = _utility(test, rng.integers(0, 3, size=(len(LAMBDAS), test.n_samples)))
    single = _utility(test, reference_actions("single-best", train, test, LAMBDAS))
    cheapest = _utility(test, np.zeros((len(LAMBDAS), test.n_samples), dtype=int))
    oracle = _utility(test, reference_actions("oracle", train, test, LAMBDAS))
    assert np.all(learned > uniform + 10)
    assert np.all(learned > cheapest + 10)
    assert learned.mean() > single.mean() + 5
    assert np.all(learned <= oracle + 1e-9)


@pytest.mark.parametrize(
    "name",
    [
        "baseline",
        "r-and-c",
        "carrot-knn",
        "carrot-embednet",
        "cf-regression",
        "rm-classification",
        "full-feedback",
        "full-info-regret",
        "full-info-regression",
        "rm-interval",
        "rm-cluster",
    ],
)
@pytest.mark.slow
def test_every_method_learns_something(setting, name):
    data, train, test, oracle = setting
    router = make_router(name, train=FAST, hidden=(64, 64))
    router.fit(oracle if router.full_information else data, LAMBDAS)
    actions = router.predict(test.X, LAMBDAS)
    assert actions.shape == (len(LAMBDAS), test.n_samples)
    uniform = _utility(test, np.random.default_rng(1).integers(0, 3, size=actions.shape))
    assert _utility(test, actions).mean() > uniform.mean() + 5


def test_registry_has_the_papers_nine_methods_rm_cluster_and_the_full_information_references():
    assert method_names() == [
        "full-feedback",
        "full-info-regret",
        "full-info-regression",
        "baseline",
        "r-and-c",
        "carrot-knn",
        "carrot-embednet",
        "cf-regression",
        "rm-classification",
        "rm-softmax",
        "rm-interval",
        "rm-cluster",
    ]
    assert all(router_class(name).name == name for name in method_names())  # each class is what its name says
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        make_router("nope")
    with pytest.raises(RuntimeError, match="not fitted"):
        make_router("rm-softmax").predict(np.zeros((2, 8)), [0.0])


@pytest.mark.slow
def test_full_information_regret_is_a_ceiling_for_the_log_trained_rm_router(setting):
    """The same network and objective as RM-Softmax on the true utilities of every model: at least as good
    as RM-Softmax on DR scores of the logs, and a full-information router (it trains on the oracle's data)."""
    data, _, test, oracle = setting
    full = make_router("full-info-regret", train=FAST, hidden=(64, 64))
    assert full.full_information and make_router("full-info-regression").full_information
    ceiling = _utility(test, full.fit(oracle, LAMBDAS).predict(test.X, LAMBDAS))
    rm = _utility(test, make_router("rm-softmax", train=FAST, hidden=(64, 64)).fit(data, LAMBDAS).predict(test.X, LAMBDAS))
    assert ceiling.mean() >= rm.mean() - 0.5


def test_per_lambda_policy_refuses_an_untrained_lambda(setting):
    data, _, test, _ = setting
    rm = make_router("rm-softmax", train=TrainConfig(max_epochs=5), hidden=(8,)).fit(data, [0.0])
    with pytest.raises(ValueError, match="not 100.0"):
        rm.predict(test.X, [100.0])
