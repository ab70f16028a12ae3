import numpy as np
import pytest

from regret_gateway.evaluation.report import curve_auc, trapezoid_auc
from regret_gateway.evaluation.simulation import logging_probabilities, simulate_logs
from tests.conftest import make_world


def test_logged_propensities_are_the_exact_sampling_probabilities():
    world = make_world(n=20000, seed=5)
    probs = logging_probabilities(world, "accuracy-softmax")
    assert np.allclose(probs.sum(1), 1.0)
    logs = simulate_logs(world, policy="accuracy-softmax", seed=5)
    assert np.allclose(logs.propensity, probs[np.arange(world.n_samples), logs.action])
    freq = np.bincount(logs.action, minlength=3) / world.n_samples
    assert np.allclose(freq, probs.mean(0), atol=0.01)
    assert np.array_equal(logs.quality, world.quality[np.arange(world.n_samples), logs.action])


def test_x_only_policy_depends_on_x_alone():
    """Flip every outcome of a world (same prompts): the x-only logging policy does not move, the
    outcome-dependent one (the paper's) does."""
    from regret_gateway.data import FullFeedback

    world = make_world(n=200, seed=6)
    flipped = FullFeedback(X=world.X, quality=1.0 - world.quality, cost=world.cost, model_names=world.model_names)
    p1 = logging_probabilities(world, "x-only", seed=1)
    assert np.allclose(p1, logging_probabilities(flipped, "x-only", seed=1))
    assert not np.allclose(p1, p1.mean(0))  # it does depend on x
    assert not np.allclose(logging_probabilities(world, "accuracy-softmax"), logging_probabilities(flipped, "accuracy-softmax"))
    with pytest.raises(ValueError, match="unknown logging policy"):
        logging_probabilities(world, "greedy")


def test_trapezoid_auc_matches_the_known_area():
    assert trapezoid_auc(np.array([0.0, 1.0, 0.5]), np.array([0.0, 1.0, 0.5])) == pytest.approx(0.5)
    # a flat curve at 0.8 from x=0.2 extended to x=1 has area 0.8 * 0.8
    assert curve_auc(np.array([0.2, 0.2]), np.array([0.8, 0.8]), cost_max=1.0) == pytest.approx(0.64)


def _summary(methods, evaluate_on="test"):
    from regret_gateway.evaluation.offline import OfflineConfig
    from regret_gateway.evaluation.report import OfflineSummary

    config = OfflineConfig(trials=1, methods=("rm-softmax",), evaluate_on=evaluate_on)
    return OfflineSummary(
        dataset={"mean_cost": {"a": 2e-4}, "mean_accuracy": {"a": 0.6}},
        config=config,
        methods=methods,
        paired={},
        diagnostics={},
        raw={},
    )


def _method(**kw):
    from regret_gateway.evaluation.report import MethodSummary

    values = dict(
        lambdas=[0.0, 100.0],
        utility_mean=[50.0, 40.0],
        utility_std=[1.0, 1.0],
        accuracy_mean=[0.5, 0.6],
        cost_mean=[1e-4, 2e-4],
        auc=0.5,
        auc_std=0.0,
        utility_over_lambda_mean=45.0,
        utility_over_lambda_std=1.0,
        seconds_per_trial=1.0,
    )
    return MethodSummary(**{**values, **kw})


def test_table_names_the_split_it_was_scored_on():
    from regret_gateway.evaluation.report import utility_table

    assert utility_table(_summary({"rm-softmax": _method()})).startswith("Test utility x100")
    # settings chosen on validation must not read as test numbers
    assert utility_table(_summary({"rm-softmax": _method()}, "val")).startswith("Validation utility x100")


def test_every_curve_of_the_plot_looks_different(tmp_path, monkeypatch):
    """Every method, the served row and two references: more than matplotlib's 10 default colours, none may share a look."""
    import matplotlib.pyplot as plt

    from regret_gateway.evaluation.report import plot_curves
    from regret_gateway.policy.registry import method_names

    results = _summary({name: _method() for name in [*method_names(), "served", "single-best", "oracle"]})
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: None)  # keep the figure open to read its lines
    plot_curves(results, tmp_path / "curves.png")
    fig = plt.gcf()
    close(fig)
    lines = [line for line in fig.axes[0].get_lines() if "zero router" not in str(line.get_label())]
    looks = {(tuple(plt.matplotlib.colors.to_rgba(l.get_color())), l.get_linestyle()) for l in lines}
    assert len(lines) == len(method_names()) + 3 and len(looks) == len(lines)


def test_the_frontier_places_each_method_against_the_single_models_hull():
    """AIQ and the cost to reach 80% / 95% of the best single model's quality: a router above the chord of the
    two models beats the zero router on both; always the dear model is the zero router's hull itself; a
    router that never reaches 95% of it says so."""
    from regret_gateway.evaluation.report import ZERO_ROUTER, frontier

    singles = {"cheap": (1e-4, 0.5), "dear": (1e-3, 0.8)}
    f = frontier({"router": ([1e-4, 3e-4], [0.6, 0.78]), "always-dear": ([1e-3], [0.8]), "weak": ([2e-4], [0.7])}, singles)
    zero = f[ZERO_ROUTER]
    assert f["router"].aiq > zero.aiq == pytest.approx(f["always-dear"].aiq)
    assert zero.cost_to_95 == pytest.approx((1e-4 + 0.26 / 0.3 * 9e-4) / 1e-3)  # along the chord to 0.76
    assert f["router"].cost_to_95 == pytest.approx((1e-4 + 0.16 / 0.18 * 2e-4) / 1e-3)
    assert f["router"].cost_to_95 < zero.cost_to_95
    assert f["weak"].cost_to_95 is None and f["weak"].cost_to_80 is not None
