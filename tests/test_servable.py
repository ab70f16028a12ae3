"""Servable policies route in numpy: the same scores as their torch networks, and no torch call per request."""

import numpy as np
import pytest
import torch

from regret_gateway.nn.networks import IntervalNets, StackedMLP
from regret_gateway.servable import (
    ClusterPolicy,
    OutcomePolicy,
    PerTierPolicy,
    TieredPolicy,
    from_state,
    gelu,
    interval_ends,
    outcome_heads,
)

MODELS = ("a", "b", "c")
TIERS = [0.0, 200.0, 1000.0]
DIM = 24


@pytest.fixture
def nets():
    torch.manual_seed(0)
    tier_net, intervals = StackedMLP(3, DIM, 3, (32, 32)), IntervalNets(2, 3)
    with torch.no_grad():  # move the interval nets off their initial average so every term matters
        for p in intervals.parameters():
            p.add_(0.3 * torch.randn_like(p))
    outcome = StackedMLP(3, DIM, 2, (32, 32))
    X = np.random.default_rng(0).normal(size=(400, DIM)).astype(np.float32)
    return tier_net, intervals, outcome, X


def test_gelu_is_torchs_exact_gelu():
    x = torch.linspace(-10, 10, 200_001)
    exact = 0.5 * x.double() * torch.special.erfc(-x.double() / 2**0.5)  # float64 reference
    np.testing.assert_allclose(gelu(x.numpy()), exact.numpy(), atol=1e-6, rtol=0)
    # torch's own float32 erf differs by CPU (seen up to 1.1e-6 from the float64 value): within that
    np.testing.assert_allclose(gelu(x.numpy()), torch.nn.functional.gelu(x).numpy(), atol=2.5e-6, rtol=0)


def test_numpy_scores_equal_the_torch_networks_at_every_kind_of_lambda(nets):
    tier_net, intervals, outcome, X = nets
    policy = TieredPolicy(MODELS, TIERS, tier_net, intervals)
    Xt = torch.as_tensor(X)
    with torch.no_grad():
        tiers = tier_net(Xt)
        for lam, ref in ((0.0, tiers[0]), (200.0, tiers[1]), (1000.0, tiers[2]), (5000.0, tiers[2])):
            np.testing.assert_allclose(policy.logits(X, lam), ref.numpy(), atol=1e-5)
        for lam, j in ((50.0, 0), (600.0, 1)):  # strictly inside an interval: that interval's net
            s = (lam - TIERS[j]) / (TIERS[j + 1] - TIERS[j])
            ref = intervals(interval_ends(tier_net, Xt)[j : j + 1], s, slice(j, j + 1))[0]
            np.testing.assert_allclose(policy.logits(X, lam), ref.numpy(), atol=1e-5)
            assert (policy.choose(X, lam) == ref.numpy().argmax(1)).all()
        cost_scale = np.array([1e-3, 2e-3, 5e-4])
        raw = outcome(Xt)  # (T, n, 2): quality logit, cost / cost_scale
        quality = torch.sigmoid(raw[..., 0]).T
        cost = (raw[..., 1].T * torch.as_tensor(cost_scale, dtype=torch.float32)).clamp(min=0.0)
    rc = OutcomePolicy(MODELS, outcome, cost_scale)
    np.testing.assert_allclose(rc.logits(X, 300.0), (quality - 300.0 * cost).numpy(), atol=1e-6)
    np.testing.assert_allclose(outcome_heads(raw.numpy(), cost_scale)[0], quality.numpy(), atol=1e-6)
    loaded = from_state(rc.state())  # a saved and loaded policy routes the same
    np.testing.assert_array_equal(loaded.logits(X, 300.0), rc.logits(X, 300.0))


def test_routing_a_request_runs_no_torch_network(nets, monkeypatch):
    """After the policy is built, its scores come from numpy arrays: a forward pass of any torch network
    during routing fails this test."""
    tier_net, intervals, outcome, X = nets
    rc = OutcomePolicy(MODELS, outcome, np.array([1e-3, 2e-3, 5e-4]))
    centroids = np.random.default_rng(1).normal(size=(4, DIM))
    cluster = ClusterPolicy(MODELS, centroids, np.full((4, 3), 0.5), np.full((4, 3), 1e-3))
    policy = PerTierPolicy(TIERS, [TieredPolicy(MODELS, TIERS, tier_net, intervals), rc, cluster],
                           ["rm-interval", "r-and-c", "rm-cluster"], estimator=rc)  # fmt: skip

    def forbidden(*args, **kwargs):
        raise AssertionError("a torch network ran on the routing path")

    monkeypatch.setattr(StackedMLP, "forward", forbidden)
    monkeypatch.setattr(IntervalNets, "forward", forbidden)
    for lam in (0.0, 100.0, 200.0, 1000.0, 3000.0):
        logits, utilities = policy.logits_and_utilities(X[:1], lam)
        assert logits.shape == utilities.shape == (1, 3)


def test_a_tier_that_serves_its_own_estimator_runs_one_forward_pass(nets):
    """IGW reads utility estimates beside the choice; where the tier serves R&C (the estimator itself) one
    pass gives both, where it serves RM-Interval the estimator runs once more."""
    tier_net, intervals, outcome, X = nets
    rc = OutcomePolicy(MODELS, outcome, np.array([1e-3, 2e-3, 5e-4]))
    interval = TieredPolicy(MODELS, TIERS, tier_net, intervals)
    policy = PerTierPolicy(TIERS, [rc, interval, interval], ["r-and-c", "rm-interval", "rm-interval"], estimator=rc)
    calls = []
    for p in (rc, interval):
        original = p._logits
        p._logits = lambda X, lam, original=original, p=p: (calls.append(p.kind), original(X, lam))[1]
    logits, utilities = policy.logits_and_utilities(X, 0.0)
    assert calls == ["r-and-c"] and utilities is logits
    np.testing.assert_array_equal(utilities, rc.utility_estimates(X, 0.0))
    calls.clear()
    logits, utilities = policy.logits_and_utilities(X, 1000.0)
    assert sorted(calls) == ["r-and-c", "rm-interval"]
    np.testing.assert_array_equal(logits, interval.logits(X, 1000.0))
    np.testing.assert_array_equal(utilities, rc.utility_estimates(X, 1000.0))
