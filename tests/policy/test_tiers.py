import numpy as np
import pytest

from regret_gateway.policy.methods import make_router
from regret_gateway.policy.training import TrainConfig
from tests.policy.test_methods import setting  # noqa: F401  (module fixture)


def test_routing_rule_exact_between_and_outside(setting):  # noqa: F811
    data, _, test = setting
    router = make_router("rm-interval", tiers=[0.0, 200.0], train=TrainConfig(max_epochs=200, patience=20), hidden=(32, 32))
    router.fit(data, [0.0, 100.0, 200.0])
    X = test.X[:200]
    tier0 = router.policies_.predict(X, [0.0])[0]
    tier2 = router.policies_.predict(X, [200.0])[0]
    assert np.array_equal(router.predict(X, [0.0])[0], tier0)
    assert np.array_equal(router.predict(X, [200.0])[0], tier2)
    assert np.array_equal(router.predict(X, [5000.0])[0], tier2)  # above the last tier: nearest tier
    between = router.predict(X, [100.0])[0]
    assert between.shape == (200,)
    # the interval net agrees with its ends where both ends agree (it was fitted on both)
    assert set(between.tolist()) <= {0, 1, 2}
    with pytest.raises(ValueError, match="lambda must be finite and >= 0"):
        router.route_logits(X, -1.0)


def test_default_tiers_are_every_other_lambda(setting):  # noqa: F811
    data, _, _ = setting
    router = make_router("rm-interval", train=TrainConfig(max_epochs=3), hidden=(8,)).fit(data, [0.0, 50.0, 100.0, 150.0, 200.0])
    assert router.tiers_.tolist() == [0.0, 100.0, 200.0]
