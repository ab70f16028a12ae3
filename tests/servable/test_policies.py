"""Servable policies route in numpy: the same scores as their torch networks, and the serving module
imports no torch."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from regret_gateway.nn.networks import IntervalNets, StackedMLP, interval_ends
from regret_gateway.servable import (
    Candidate,
    ClusterPolicy,
    IntervalArrays,
    MLPArrays,
    OutcomePolicy,
    PublishedRouter,
    RMIntervalPolicy,
    ServedTier,
    from_state,
    gelu,
    outcome_heads,
)

MODELS = ("a", "b", "c")
TIERS = [0.0, 200.0, 1000.0]
NAMES = ("premium", "standard", "economy")  # a tier's name for each of TIERS
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
    policy = RMIntervalPolicy(MODELS, TIERS, MLPArrays.of(tier_net), IntervalArrays.of(intervals))
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
    rc = OutcomePolicy(MODELS, MLPArrays.of(outcome), cost_scale)
    np.testing.assert_allclose(rc.logits(X, 300.0), (quality - 300.0 * cost).numpy(), atol=1e-6)
    np.testing.assert_allclose(outcome_heads(raw.numpy(), cost_scale)[0], quality.numpy(), atol=1e-6)
    loaded = from_state(rc.state())  # a saved and loaded policy routes the same
    np.testing.assert_array_equal(loaded.logits(X, 300.0), rc.logits(X, 300.0))


def test_a_policy_of_every_kind_is_saved_and_routed_without_torch(nets, tmp_path):
    """Every kind's state round-trips through numpy alone: a process that cannot import torch loads the
    state and gives the same scores as the policy it came from."""
    tier_net, intervals, outcome, X = nets
    rc = OutcomePolicy(MODELS, MLPArrays.of(outcome), np.array([1e-3, 2e-3, 5e-4]))
    centroids = np.random.default_rng(1).normal(size=(4, DIM))
    cluster = ClusterPolicy(MODELS, centroids, np.full((4, 3), 0.5), np.full((4, 3), 1e-3))
    interval = RMIntervalPolicy(MODELS, TIERS, MLPArrays.of(tier_net), IntervalArrays.of(intervals))
    served = [(interval, Candidate("rm-interval")), (rc, Candidate("r-and-c")), (cluster, Candidate("rm-cluster"))]
    router = PublishedRouter(
        {name: ServedTier(lam, candidate, policy) for name, lam, (policy, candidate) in zip(NAMES, TIERS, served)}, estimator=rc
    )
    lams = [0.0, 100.0, 200.0, 600.0, 1000.0, 3000.0]
    expected = {f"{name} {lam}": router.logits_and_utilities(name, X[:5], lam) for name in NAMES for lam in lams}
    np.savez(tmp_path / "x.npz", X=X[:5])
    from regret_gateway.artifacts import pack_state

    tree, arrays = pack_state(router.state())
    np.savez(tmp_path / "state.npz", **arrays)
    (tmp_path / "tree.json").write_text(json.dumps(tree))
    script = f"""
import json, sys
import numpy as np
sys.modules["torch"] = None  # importing torch now fails
from regret_gateway.artifacts import unpack_state
from regret_gateway.servable import PublishedRouter
tree = json.loads(open({str(tmp_path / "tree.json")!r}).read())
router = PublishedRouter.from_state(unpack_state(tree, dict(np.load({str(tmp_path / "state.npz")!r}, allow_pickle=False))))
X = np.load({str(tmp_path / "x.npz")!r})["X"]
out = {{f"{{name}} {{lam}}": [a.tolist() for a in router.logits_and_utilities(name, X, lam)]
        for name in {NAMES!r} for lam in {lams!r}}}
print(json.dumps(out))
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    for key, (logits, utilities) in expected.items():  # the same up to BLAS's summation order in another process
        np.testing.assert_allclose(np.asarray(got[key][0]), logits, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(np.asarray(got[key][1]), utilities, rtol=1e-5, atol=1e-7)


def test_a_tier_that_serves_its_own_estimator_runs_one_forward_pass(nets):
    """IGW reads utility estimates beside the choice; where the tier serves R&C (the estimator itself) one
    pass gives both, where it serves RM-Interval the estimator runs once more."""
    tier_net, intervals, outcome, X = nets
    rc = OutcomePolicy(MODELS, MLPArrays.of(outcome), np.array([1e-3, 2e-3, 5e-4]))
    interval = RMIntervalPolicy(MODELS, TIERS, MLPArrays.of(tier_net), IntervalArrays.of(intervals))
    served = [(rc, Candidate("r-and-c")), (interval, Candidate("rm-interval")), (interval, Candidate("rm-interval"))]
    router = PublishedRouter(
        {name: ServedTier(lam, candidate, policy) for name, lam, (policy, candidate) in zip(NAMES, TIERS, served)}, estimator=rc
    )
    calls = []
    for p in (rc, interval):
        original = p._logits
        p._logits = lambda X, lam, original=original, p=p: (calls.append(p.kind), original(X, lam))[1]
    logits, utilities = router.logits_and_utilities("premium", X)
    assert calls == ["r-and-c"] and utilities is logits
    np.testing.assert_array_equal(utilities, rc.utility_estimates(X, 0.0))
    calls.clear()
    logits, utilities = router.logits_and_utilities("economy", X)
    assert sorted(calls) == ["r-and-c", "rm-interval"]
    np.testing.assert_array_equal(logits, interval.logits(X, 1000.0))
    np.testing.assert_array_equal(utilities, rc.utility_estimates(X, 1000.0))


def test_choices_at_several_lambdas_are_each_lambdas_choice_from_one_pass_over_what_lambda_does_not_change(nets):
    """Retrain values every tier's candidates at once: ``choices(X, lams)`` is ``choose`` at each lambda, and
    R&C runs its outcome networks once for all of them, RM-Cluster assigns the nearest centroids once."""
    tier_net, intervals, outcome, X = nets
    rng = np.random.default_rng(2)
    rc = OutcomePolicy(MODELS, MLPArrays.of(outcome), np.array([1e-3, 2e-3, 5e-4]))
    cluster = ClusterPolicy(MODELS, rng.normal(size=(4, DIM)), rng.random((4, 3)), 1e-3 * rng.random((4, 3)))
    interval = RMIntervalPolicy(MODELS, TIERS, MLPArrays.of(tier_net), IntervalArrays.of(intervals))
    lams = [0.0, 50.0, 200.0, 600.0, 1000.0, 3000.0]
    passes = []
    rc.arrays.forward = lambda X, member=None, f=rc.arrays.forward: (passes.append("r-and-c"), f(X, member))[1]
    cluster.clusters = lambda X, f=cluster.clusters: (passes.append("rm-cluster"), f(X))[1]
    for policy in (rc, cluster, interval):
        each = np.stack([policy.choose(X, lam) for lam in lams])
        assert len({tuple(row) for row in each}) > 2  # the lambdas choose apart: a wrong one would show
        passes.clear()
        np.testing.assert_array_equal(policy.choices(X, lams), each)
        assert passes == ([] if policy is interval else [policy.kind if policy is rc else "rm-cluster"])
    assert rc.choices(X, []).shape == (0, len(X))


def test_a_long_input_runs_through_the_networks_block_by_block_as_one_pass_would(nets, monkeypatch):
    """Past ``MLPArrays.BLOCK`` rows the forward pass runs block by block (each GELU on what the cache holds),
    member by member or all at once, with what one pass over every row gives, to float32's rounding."""
    from regret_gateway.servable import arrays as module

    tier_net, intervals, outcome, X = nets
    net = MLPArrays.of(outcome)
    whole, one = net.forward(X), net.forward(X, 1)  # 400 rows: one block
    rows_seen = []
    monkeypatch.setattr(module, "gelu", lambda h, f=module.gelu: (rows_seen.append(h.shape[-2]), f(h))[1])
    monkeypatch.setattr(MLPArrays, "BLOCK", 64)  # 400 rows: six blocks of 64 and one of 16
    np.testing.assert_allclose(net.forward(X), whole, atol=1e-6)
    np.testing.assert_allclose(net.forward(X, 1), one, atol=1e-6)
    assert max(rows_seen) == 64 and sum(rows_seen) == 2 * 2 * len(X)  # two hidden layers, two passes


def test_a_snapshot_owns_its_arrays_so_the_network_may_change_or_move_after_it():
    """A snapshot that viewed the network's tensors would change with it, and serve freed memory once torch
    moves their storage (sending the network to another process moves it into shared memory)."""
    net, intervals = StackedMLP(2, 8, 3, (4,)), IntervalNets(1, 3)
    tiers, ends = MLPArrays.of(net), IntervalArrays.of(intervals)
    before = [w.copy() for w in tiers.weights] + [ends.out_weight.copy()]
    with torch.no_grad():
        for p in [*net.parameters(), *intervals.parameters()]:
            p.add_(1.0)
    assert not any(np.shares_memory(w, p.detach().numpy()) for w, p in zip(tiers.weights, net.weights))
    assert all(np.array_equal(a, b) for a, b in zip(before, [*tiers.weights, ends.out_weight]))


def test_a_priced_policy_reads_the_prompts_size_and_round_trips_through_numpy():
    """Quality 0.9 / 0.6, prices $20 / $1 per million prompt tokens: at lambda 10 a 200-token prompt goes to
    the dear model and a 20,000-token one to the cheap model; its scores are its utility estimates, and its
    state round-trips."""
    from regret_gateway.artifacts import pack_state, unpack_state
    from regret_gateway.context import SizeFeature
    from regret_gateway.servable import PricedPolicy, from_state

    size = SizeFeature()
    X = size.append(np.zeros((2, 3), dtype=np.float32), [200, 20_000])
    np.testing.assert_allclose(size.tokens(X), [200, 20_000], rtol=1e-4)
    policy = PricedPolicy(("dear", "cheap"), [0.9, 0.6], [0.0, 0.0], [20e-6, 1e-6], size.weight, 4)
    assert policy.choose(X, 10.0).tolist() == [0, 1] and policy.choose(X, 0.0).tolist() == [0, 0]
    np.testing.assert_allclose(policy.utility_estimates(X, 10.0)[1], [0.9 - 10 * 0.4, 0.6 - 10 * 0.02], rtol=1e-3)
    tree, arrays = pack_state(policy.state())
    again = from_state(unpack_state(json.loads(json.dumps(tree)), arrays))
    np.testing.assert_allclose(again.logits(X, 10.0), policy.logits(X, 10.0))


def test_a_candidate_s_kind_is_one_type_that_reads_and_writes_as_its_name():
    """A candidate's kind is a CandidateKind wherever it came from (a string in a saved artifact, the gate's
    member), names itself by its value in labels and saved state, and an unknown kind is refused by name."""
    import json

    from regret_gateway.servable import LEARNED, Candidate, CandidateKind

    loaded = Candidate.from_state(json.loads(json.dumps(Candidate("regions", "m").state())))
    assert loaded.kind is CandidateKind.REGIONS and loaded == Candidate(CandidateKind.REGIONS, "m")
    assert loaded.label == "regions:m" and Candidate(CandidateKind.R_AND_C, version="v1").label == "r-and-c (v1)"
    assert json.loads(json.dumps(loaded.state())) == {"kind": "regions", "model": "m"}
    assert loaded.safe and not any(Candidate(k).safe for k in LEARNED)
    with pytest.raises(ValueError, match="unknown candidate kind 'rm-magic'; one of rm-interval"):
        Candidate("rm-magic")
