import numpy as np
import pytest

from regret_gateway.evaluation.offline import evaluate_actions
from regret_gateway.nn.training import TrainConfig
from regret_gateway.policy.registry import make_router
from tests.policy.test_methods import setting  # noqa: F401  (module fixture)


def test_routing_rule_exact_between_and_outside(setting):  # noqa: F811
    data, _, test, _ = setting
    router = make_router("rm-interval", tiers=[0.0, 200.0], train=TrainConfig(max_epochs=200, patience=20), hidden=(32, 32))
    router.fit(data, [0.0, 100.0, 200.0])
    X = test.X[:200]
    tier0 = router.policies_.predict(X, [0.0])[0]
    tier2 = router.policies_.predict(X, [200.0])[0]
    assert np.array_equal(router.predict(X, [0.0])[0], tier0)
    assert np.array_equal(router.predict(X, [200.0])[0], tier2)
    assert np.array_equal(router.predict(X, [5000.0])[0], tier2)  # above the last tier: nearest tier
    with pytest.raises(ValueError, match="lambda must be finite and >= 0"):
        router.route_logits(X, -1.0)


def test_default_tiers_are_every_other_lambda(setting):  # noqa: F811
    data, _, _, _ = setting
    router = make_router("rm-interval", train=TrainConfig(max_epochs=3), hidden=(8,)).fit(data, [0.0, 50.0, 100.0, 150.0, 200.0])
    assert router.tiers_.tolist() == [0.0, 100.0, 200.0]


@pytest.fixture(scope="module")
def interval_router(setting):  # noqa: F811
    data, _, _, _ = setting
    return make_router("rm-interval", tiers=[0.0, 200.0], train=TrainConfig(patience=100), hidden=(64, 64)).fit(
        data, [0.0, 200.0]
    )


@pytest.mark.xfail(
    strict=True,
    reason="known defect: at s=0 the interval net loses ~6 points to the lambda=0 tier "
    "policy on this world (87.5 vs 93.3); RM-Interval's interval training needs work",
)
def test_interval_net_is_as_good_as_the_tier_policies_at_its_ends(setting, interval_router):  # noqa: F811
    """At s=0 and s=1 the interval net is as good as the tier policies at their own lambdas: it was fitted
    on both ends."""
    _, _, test, _ = setting
    policy = interval_router.to_policy()
    tier_logits = policy.tier_arrays.forward(np.asarray(test.X, dtype=np.float32))  # (m, n, T)
    ends = np.concatenate([tier_logits[0], tier_logits[1]], axis=-1)
    at0, at1 = policy.intervals.forward(ends, 0.0, 0).argmax(-1), policy.intervals.forward(ends, 1.0, 0).argmax(-1)
    tier0, tier1 = interval_router.predict(test.X, [0.0])[0], interval_router.predict(test.X, [200.0])[0]
    u = evaluate_actions(test, [0.0, 0.0, 200.0, 200.0], np.stack([at0, tier0, at1, tier1]))["utility"]
    assert u[0] >= u[1] - 1.0 and u[2] >= u[3] - 1.0, u


def test_between_tiers_the_interval_net_is_not_worse_than_both_end_policies(setting, interval_router):  # noqa: F811
    _, _, test, _ = setting
    tier0, tier1 = interval_router.predict(test.X, [0.0])[0], interval_router.predict(test.X, [200.0])[0]
    for lam in (50.0, 100.0, 150.0):
        u = evaluate_actions(test, [lam] * 3, np.stack([interval_router.predict(test.X, [lam])[0], tier0, tier1]))["utility"]
        assert u[0] >= min(u[1], u[2]) - 1.0, (lam, u)
