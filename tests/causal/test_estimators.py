"""Statistical tests: the estimators recover known policy values."""

import numpy as np
import pytest

from regret_gateway.causal.estimators import (
    CounterfactualScores,
    DirectMethod,
    DoublyRobust,
    InverseProbabilityWeighting,
    Nuisance,
)
from regret_gateway.causal.outcome import OutcomeModel
from regret_gateway.causal.propensity import LoggedPropensity
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.nn.training import TrainConfig
from tests.conftest import make_world


def _value(scores_matrix, policy):
    return scores_matrix[np.arange(len(policy)), policy].mean()


def test_dr_recovers_policy_value_where_a_biased_outcome_model_misleads_dm():
    world = make_world(n=20000, seed=1)
    logs = simulate_logs(world, policy="x-only", seed=1)
    policy = np.where(world.X[:, 0] > 0, 0, 1)  # route each side to its good small model
    truth = _value(world.quality, policy)
    biased = np.clip(world.quality * 0 + 0.55, 0, 1)  # an outcome model that ignores x entirely
    cost_hat = np.broadcast_to(world.cost.mean(0), world.cost.shape)
    dm = DirectMethod(clip=None).estimate(logs, logs.propensity, biased, cost_hat)
    dr = DoublyRobust(clip=None).estimate(logs, logs.propensity, biased, cost_hat)
    ipw = InverseProbabilityWeighting(clip=None).estimate(logs, logs.propensity, None, None)
    dr_terms = dr.quality[np.arange(len(policy)), policy]
    se = dr_terms.std() / np.sqrt(len(policy))
    assert abs(dr_terms.mean() - truth) < 3 * se + 0.01
    assert abs(_value(ipw.quality, policy) - truth) < 0.03
    assert abs(_value(dm.quality, policy) - truth) > 0.2  # DM inherits the outcome model's bias


def test_dr_takes_the_corrected_target_where_the_observed_score_is_a_noisy_judges():
    """A judge that passes 40% of wrong answers: its scores overrate every policy; the same logs with the
    scores corrected for that error (``target``) are valued right."""
    import dataclasses

    world = make_world(n=20000, seed=3)
    logs = simulate_logs(world, policy="x-only", seed=3)
    rng = np.random.default_rng(11)  # not the logs' seed: the judge's errors are its own
    false_pass = 0.4
    judged = (rng.random(logs.n_samples) < false_pass + (1 - false_pass) * logs.quality).astype(float)
    noisy = dataclasses.replace(logs, quality=judged, target=None)
    corrected = dataclasses.replace(logs, quality=judged, target=(judged - false_pass) / (1 - false_pass))
    policy = np.where(world.X[:, 0] > 0, 1, 0)  # each side to the model that is wrong there more often
    truth = _value(world.quality, policy)
    flat = np.full(world.quality.shape, 0.55)
    cost_hat = np.broadcast_to(world.cost.mean(0), world.cost.shape)
    terms = DoublyRobust(clip=None).estimate(corrected, logs.propensity, flat, cost_hat).quality[np.arange(len(policy)), policy]
    assert abs(terms.mean() - truth) < 3 * terms.std() / np.sqrt(len(policy)) + 0.01
    raw = DoublyRobust(clip=None).estimate(noisy, logs.propensity, flat, cost_hat)
    assert _value(raw.quality, policy) - truth > 0.1  # the judge's own scores overrate it (by 0.4 x its failures)


@pytest.mark.slow
def test_fitted_nuisance_dr_is_unbiased_on_every_model():
    world = make_world(n=3000, seed=2)
    logs = simulate_logs(world, policy="x-only", seed=2)
    fast = TrainConfig(max_epochs=200, patience=20)
    scores = Nuisance(
        propensity=LoggedPropensity(), outcome=OutcomeModel(train=fast), estimator=DoublyRobust(clip=None)
    ).fit_scores(logs)
    for t in range(world.n_models):
        true_mean = world.quality[:, t].mean()
        assert abs(scores.quality[:, t].mean() - true_mean) < 0.05, world.model_names[t]


@pytest.mark.slow
def test_xgboost_propensity_learns_an_x_dependent_logging_policy():
    from regret_gateway.causal.propensity import PropensityModel

    world = make_world(n=3000, seed=3)
    logs = simulate_logs(world, policy="x-only", seed=3)
    model = PropensityModel(max_depths=(1, 2), n_estimators=(10, 50)).fit(logs.X, logs.action, 3)
    p_hat = model.predict_observed(logs.X, logs.action)
    assert np.mean(np.abs(p_hat - logs.propensity)) < np.mean(np.abs(1 / 3 - logs.propensity))
    assert set(model.best_params_) == {"max_depth", "n_estimators"}
    with pytest.raises(RuntimeError, match="not fitted"):
        PropensityModel().predict_proba(logs.X)


def test_imported_rows_get_their_own_policys_estimate_and_logged_rows_keep_theirs():
    """Logs of two policies: the gateway's rows carry their exact propensity; rows imported from a history
    routed by another, x-dependent policy carry none. The imported rows' propensities estimate that
    history's policy (fitted on those rows alone), and the logged rows keep their logged values."""

    from regret_gateway.causal.propensity import PropensityModel
    from regret_gateway.data import LoggedFeedback

    world = make_world(n=2400, seed=4)
    gateway_rows = simulate_logs(world, policy="uniform", seed=4)
    history = simulate_logs(world, policy="x-only", seed=5)
    imported = np.arange(world.X.shape[0]) < 1200  # the first half came from the history, unlogged
    logs = LoggedFeedback(
        world.X, np.where(imported, history.action, gateway_rows.action), world.quality[np.arange(2400), 0],
        world.cost[np.arange(2400), 0], world.model_names, propensity=np.where(imported, np.nan, gateway_rows.propensity),
    )  # fmt: skip
    assert logs.imported.tolist() == imported.tolist()
    assert LoggedFeedback(logs.X, logs.action, logs.quality, logs.cost, logs.model_names,
                          propensity=np.full(2400, np.nan)).propensity is None  # fmt: skip
    with pytest.raises(ValueError, match="imported"):
        LoggedPropensity().observed(logs)
    p = PropensityModel(max_depths=(1, 2), n_estimators=(10, 50)).fit_logs(logs).observed(logs)
    assert np.array_equal(p[~imported], gateway_rows.propensity[~imported])
    truth = history.propensity[imported]
    # fitted on the imported rows alone, the estimate follows the history's policy, not the mixture's
    assert np.mean(np.abs(p[imported] - truth)) < 0.5 * np.mean(np.abs(1 / 3 - truth))


def test_clipping_per_column_and_global():
    q = np.array([[0.0, 10.0], [1.0, 20.0], [2.0, 30.0], [100.0, 40.0]])
    s = CounterfactualScores(q, np.zeros_like(q), clip=(25, 75))
    lo0, hi0 = np.percentile(q[:, 0], [25, 75])
    assert np.allclose(s.utility(0)[:, 0], np.clip(q[:, 0], lo0, hi0))
    g = CounterfactualScores(q, np.zeros_like(q), clip=(25, 75), clip_scope="global").utility(0)
    lo, hi = np.percentile(q, [25, 75])
    assert g.min() == pytest.approx(lo) and g.max() == pytest.approx(hi)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"clip": (95, 5)}, "percentiles"),
        ({"max_weight": 0.5}, "max_weight"),
        ({"clip_scope": "rows"}, "clip_scope"),
    ],
)
def test_bad_estimator_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DoublyRobust(**kwargs)


def test_bad_propensities_and_shapes_are_refused():
    world = make_world(n=50)
    logs = simulate_logs(world, seed=0)
    q_hat = np.full((50, 3), 0.5)
    with pytest.raises(ValueError, match=r"`propensity` must be in \(0, 1\], got min=0"):
        DoublyRobust().estimate(logs, np.zeros(50), q_hat, q_hat)
    with pytest.raises(ValueError, match=r"`predicted_quality` must have shape \(50, 3\)"):
        DoublyRobust().estimate(logs, logs.propensity, q_hat[:, :2], q_hat)
    with pytest.raises(ValueError, match="no logged propensity"):
        from regret_gateway.data import LoggedFeedback

        bare = LoggedFeedback(X=logs.X, action=logs.action, quality=logs.quality, cost=logs.cost, model_names=logs.model_names)
        Nuisance(propensity=LoggedPropensity(), outcome=OutcomeModel(train=TrainConfig(max_epochs=2))).fit_scores(bare)


def test_weights_cap_and_self_normalisation():
    world = make_world(n=400)
    logs = simulate_logs(world, seed=0)
    w = DoublyRobust(max_weight=2.0).weights(logs.action, logs.propensity, 3)
    assert w.max() <= 2.0
    sn = DoublyRobust(self_normalize=True).weights(logs.action, logs.propensity, 3)
    assert np.allclose(sn.mean(0), 1.0)
