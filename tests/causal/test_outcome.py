import numpy as np
import pytest

from regret_gateway.causal.outcome import OutcomeModel
from regret_gateway.data import LoggedFeedback
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.nn.training import TrainConfig
from tests.conftest import make_world


def test_outcome_models_learn_each_models_quality_and_cost():
    world = make_world(n=3000, seed=4)
    logs = simulate_logs(world, policy="uniform", seed=4)
    model = OutcomeModel(train=TrainConfig(max_epochs=300, patience=30), hidden=(64, 64)).fit(logs)
    q_hat, c_hat = model.predict(world.X)
    side = world.X[:, 0] > 0
    assert q_hat[side, 0].mean() > 0.75 and q_hat[~side, 0].mean() < 0.35
    assert q_hat[:, 2].mean() > 0.85
    assert np.allclose(c_hat.mean(0), world.cost.mean(0), rtol=0.2)


def test_a_model_with_no_logged_rows_is_refused_by_name():
    world = make_world(n=30)
    logs = LoggedFeedback(
        X=world.X,
        action=np.zeros(30, dtype=int),
        quality=world.quality[:, 0],
        cost=world.cost[:, 0],
        model_names=world.model_names,
    )
    with pytest.raises(ValueError, match="'small-b' \\(0\\), 'large' \\(0\\)"):
        OutcomeModel().fit(logs)
    with pytest.raises(RuntimeError, match="not fitted"):
        OutcomeModel().predict(world.X)
