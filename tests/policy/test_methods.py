"""A learned policy must beat naive ones where the truth is known."""

import numpy as np
import pytest
import torch

from regret_gateway.causal.estimators import DoublyRobust, Nuisance
from regret_gateway.causal.outcome import OutcomeModel
from regret_gateway.causal.propensity import LoggedPropensity
from regret_gateway.evaluation.offline import evaluate_actions, reference_actions
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.nn import objectives
from regret_gateway.nn.networks import StackedMLP
from regret_gateway.nn.training import TrainConfig, train_members
from regret_gateway.policy.base import TrainingData
from regret_gateway.policy.learner import fit_training_data
from regret_gateway.policy.registry import make_router, method_names
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
        "rm-interval",
    ],
)
def test_every_method_learns_something(setting, name):
    data, train, test, oracle = setting
    router = make_router(name, train=FAST, hidden=(64, 64))
    router.fit(oracle if router.full_information else data, LAMBDAS)
    actions = router.predict(test.X, LAMBDAS)
    assert actions.shape == (len(LAMBDAS), test.n_samples)
    uniform = _utility(test, np.random.default_rng(1).integers(0, 3, size=actions.shape))
    assert _utility(test, actions).mean() > uniform.mean() + 5


def test_registry_has_the_papers_nine_methods():
    assert method_names() == [
        "full-feedback",
        "baseline",
        "r-and-c",
        "carrot-knn",
        "carrot-embednet",
        "cf-regression",
        "rm-classification",
        "rm-softmax",
        "rm-interval",
    ]
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        make_router("nope")
    with pytest.raises(RuntimeError, match="not fitted"):
        make_router("rm-softmax").predict(np.zeros((2, 8)), [0.0])


def test_per_lambda_policy_refuses_an_untrained_lambda(setting):
    data, _, test, _ = setting
    rm = make_router("rm-softmax", train=TrainConfig(max_epochs=5), hidden=(8,)).fit(data, [0.0])
    with pytest.raises(ValueError, match="not 100.0"):
        rm.predict(test.X, [100.0])


def test_softmax_regret_tends_to_the_argmax_regret():
    torch.manual_seed(0)
    logits, Y = torch.randn(1, 50, 4), torch.randn(50, 4)
    hard = objectives.regret(Y, logits)
    assert torch.allclose(objectives.softmax_regret(logits, Y, tau=1e4), hard, atol=1e-4)
    uniform = (Y.max(-1).values - Y.mean(-1)).mean()
    assert torch.allclose(objectives.softmax_regret(logits, Y, tau=1e-6), uniform.reshape(1), atol=1e-4)


def test_tie_aware_labels():
    Y = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    cost = np.array([[2.0, 1.0, 0.0], [0.0, 5.0, 3.0]])
    assert np.allclose(objectives.argmax_labels(Y), [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    assert np.allclose(objectives.argmax_labels(Y, ties="cheapest", cost=cost), [[0, 1, 0], [0, 0, 1]])
    assert np.allclose(objectives.argmax_labels(Y, ties="first"), [[1, 0, 0], [0, 1, 0]])
    with pytest.raises(ValueError, match="needs `cost`"):
        objectives.argmax_labels(Y, ties="cheapest")


def test_stacked_members_train_independently_with_their_own_early_stopping():
    torch.manual_seed(0)
    net = StackedMLP(2, 3, 1, (4,))
    x, y = torch.randn(64, 3), torch.randn(64, 1)
    before = [p.detach().clone() for p in net.parameters()]

    def loss(idx):  # only member 0 has a loss; member 1's gradient is zero
        out = net(x[idx])
        return torch.stack([((out[0] - y[idx]) ** 2).mean(), out[1].sum() * 0])

    def val():
        out = net(x)
        return torch.stack([((out[0] - y) ** 2).mean(), torch.tensor(0.0)])

    result = train_members(net, 64, loss, val, TrainConfig(max_epochs=50, patience=5))
    after = list(net.parameters())
    assert all(torch.equal(b[1], a[1]) for b, a in zip(before, after))
    assert not all(torch.equal(b[0], a[0]) for b, a in zip(before, after))
    assert result.best_epoch[1] == 0 and result.best_epoch[0] > 0


def test_a_member_that_ran_out_of_patience_stays_stopped():
    """Per-member early stopping as if each network were trained alone: once member 0 has waited
    `patience` epochs without improving, a later better validation score must not revive it."""
    net = StackedMLP(2, 3, 1, (4,))
    x = torch.randn(32, 3)
    # member 0 improves at epoch 1, stalls for 3 epochs (patience 3), then would improve at epoch 6;
    # member 1 keeps improving until epoch 8
    scripted = iter(
        [
            [10.0, 10.0],
            [5.0, 9.0],
            [6.0, 8.0],
            [6.0, 7.0],
            [6.0, 6.0],
            [6.0, 5.0],
            [1.0, 4.0],
            [1.0, 3.0],
            [1.0, 2.0],
            [1.0, 2.0],
            [1.0, 2.0],
            [1.0, 2.0],
        ]
    )

    def val():
        return torch.tensor(next(scripted))

    result = train_members(net, 32, lambda idx: net(x[idx]).mean(dim=(1, 2)), val, TrainConfig(max_epochs=11, patience=3))
    assert result.best_epoch.tolist() == [1, 8]
    assert result.best_score.tolist() == [5.0, 2.0]
    assert result.epochs == 11 and net.active is None  # full compute again after training


def test_restricted_members_compute_the_same_and_take_no_gradient():
    torch.manual_seed(1)
    net = StackedMLP(3, 5, 2, (8,))
    x = torch.randn(10, 5)
    full = net(x).detach()
    net.restrict(torch.tensor([0, 2]))
    out = net(x)
    assert torch.allclose(out[[0, 2]], full[[0, 2]], atol=1e-6) and torch.equal(out[1], torch.zeros_like(out[1]))
    out.sum().backward()
    for p in net.parameters():
        assert torch.equal(p.grad[1], torch.zeros_like(p.grad[1])) and p.grad[0].abs().sum() > 0
    per_member_x = torch.randn(3, 10, 5)  # member-specific inputs (outcome models) are restricted too
    assert torch.allclose(net(per_member_x)[2], net.member(2)(per_member_x[2:3])[0], atol=1e-6)
    net.restrict(None)
    assert net(x).shape == (3, 10, 2) and torch.allclose(net(x), full, atol=1e-6)
