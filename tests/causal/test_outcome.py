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


def _shared_difficulty_logs(n: int, seed: int):
    """Eight models whose chance of a right answer is skill_t - difficulty(x): a prompt hard for one model is
    hard for all. Logged uniformly; the true probabilities of fresh prompts for scoring."""
    rng = np.random.default_rng(seed)
    T, d = 8, 16

    def prompts(k):
        X = rng.normal(size=(k, d)).astype(np.float32)
        return X / np.linalg.norm(X, axis=1, keepdims=True)

    skill = np.linspace(-1.0, 1.0, T)

    def truth(X):
        return 1 / (1 + np.exp(-(skill[None, :] - 3 * X[:, [0]])))

    X = prompts(n)
    action = rng.integers(0, T, n)
    quality = (rng.random(n) < truth(X)[np.arange(n), action]).astype(float)
    cost = np.linspace(1, 5, T)[action] * 1e-3
    logs = LoggedFeedback(X=X, action=action, quality=quality, cost=cost, model_names=tuple(f"m{t}" for t in range(T)))
    fresh = prompts(2000)
    return logs, fresh, truth(fresh)


def test_the_shared_form_learns_what_prompts_share_from_every_models_rows():
    """One trunk on every row: a prompt's difficulty, which every model's rows show, is learnt from all of
    them, where per-model networks each learn it from an eighth of the rows."""
    logs, fresh, p_true = _shared_difficulty_logs(2400, seed=0)
    train = TrainConfig(max_epochs=400, patience=30)
    per_model = OutcomeModel(train=train, hidden=(64, 64)).fit(logs)
    shared = OutcomeModel(train=train, hidden=(64, 64), shared=True).fit(logs)
    err_per_model = ((per_model.predict(fresh)[0] - p_true) ** 2).mean()
    err_shared = ((shared.predict(fresh)[0] - p_true) ** 2).mean()
    assert err_shared < 0.6 * err_per_model, (err_shared, err_per_model)
    # each model's mean cost per request, as the per-model networks learn it
    assert np.allclose(shared.predict(fresh)[1].mean(0), np.linspace(1, 5, 8) * 1e-3, rtol=0.1)


def test_the_shared_form_is_published_as_per_model_networks_that_predict_the_same():
    import torch

    from regret_gateway.causal.outcome import _SharedOutcomeNet
    from regret_gateway.servable import outcome_heads

    torch.manual_seed(0)
    net = _SharedOutcomeNet(5, 16, (32, 24), np.zeros(5))
    with torch.no_grad():
        net.deviation.normal_()  # every part of the output layer non-trivial
        net.bias.normal_()
    X = torch.randn(40, 16)
    stacked = net.as_stacked()(X)  # (T, n, 2): every model on every row
    for t in range(5):
        own = net(X, torch.full((40,), t, dtype=torch.long))
        assert torch.allclose(stacked[t], own, atol=1e-5)
    logs, fresh, _ = _shared_difficulty_logs(300, seed=1)
    model = OutcomeModel(train=TrainConfig(max_epochs=5), hidden=(8, 8), shared=True).fit(logs)
    policy = model.to_policy(logs.model_names)  # R&C as served (numpy) reads the published networks
    quality, _ = outcome_heads(policy.arrays.forward(fresh), model.cost_scale_)
    assert np.allclose(quality, model.predict(fresh)[0], atol=1e-5)
    with pytest.raises(ValueError, match="shrink"):
        OutcomeModel(shared=True, shrink=-1.0)


def test_judge_scores_are_fitted_through_the_judges_measured_error_on_request():
    """Rows scored by a judge that flips 20% of its verdicts, with that error measured (``target_errors``):
    with ``judge_error=True`` the outcome networks predict each model's true quality; by default they fit
    the scores as recorded and predict the judge's view of it, every gap between models shrunk by 1 - 2e."""
    from dataclasses import replace

    from regret_gateway.data import TargetErrors, corrected_score

    world = make_world(n=3000, seed=4)
    logs = simulate_logs(world, policy="uniform", seed=4)
    rng = np.random.default_rng(0)
    e = 0.2
    raw = np.where(rng.random(len(logs.action)) < e, 1.0 - logs.quality, logs.quality)
    errors = TargetErrors(group=np.zeros(len(raw), dtype=int), raw=raw, false_pass=np.array([e]), false_fail=np.array([e]),
                          failed=np.array([500]), passed=np.array([500]), repeats=np.array([0]), disagree=np.array([0.0]))  # fmt: skip
    judged = replace(logs, quality=raw, target=corrected_score(raw, e, e), target_errors=errors)
    config = dict(train=TrainConfig(max_epochs=300, patience=30), hidden=(64, 64))
    truth = world.quality.mean(0)
    through = OutcomeModel(**config, judge_error=True).fit(judged).predict(world.X)[0].mean(0)
    as_scored = OutcomeModel(**config).fit(judged).predict(world.X)[0].mean(0)
    assert np.abs(through - truth).max() < 0.05, (through, truth)
    assert np.abs(as_scored - (e + (1 - 2 * e) * truth)).max() < 0.05  # the judge's view: gaps shrunk by 1 - 2e
    assert np.ptp(through) > 0.9 * np.ptp(truth) and np.ptp(as_scored) < 0.7 * np.ptp(truth)  # the spread of models
