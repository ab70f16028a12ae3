"""The offline bench's ``served`` row is what ``retrain`` publishes from the trial's logs: it routes where the
prompt tells which model is better, and sends everything to the fixed choice where it does not."""

import numpy as np
import pytest

from regret_gateway.evaluation.loaders import Benchmark
from regret_gateway.evaluation.offline import OfflineConfig, run_offline


def _bench(signal: bool, n_train=400, n_test=200, seed=0):
    """Two models. With ``signal`` the first embedding coordinate says which one answers right (small on
    one half of the prompts, large on the other; large is the better fixed choice); without, large is
    better everywhere and the embedding is noise."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    code = rng.random(n) < 0.5
    if signal:
        small, large = code & (rng.random(n) < 0.95), ~code & (rng.random(n) < 0.95) | code & (rng.random(n) < 0.5)
    else:
        small, large = rng.random(n) < 0.3, rng.random(n) < 0.9
    X = np.concatenate([code[:, None].astype(float), rng.normal(size=(n, 7))], axis=1).astype(np.float32)
    if not signal:
        X[:, 0] = rng.normal(size=n)
    bench = Benchmark(
        prompts=[f"p{i}" for i in range(n)], quality=np.stack([small, large], axis=1).astype(float),
        cost=np.tile([1e-5, 1e-4], (n, 1)), model_names=("small", "large"),
        split=np.array(["train"] * n_train + ["test"] * n_test), groups=np.array(["a"] * n),
        sample_ids=[str(i) for i in range(n)], source="synthetic",
    )  # fmt: skip
    return bench, X


def _run(bench, X, cross_fit, log_draws=1):
    config = OfflineConfig(
        log_draws=log_draws,
        trials=1,
        methods=("r-and-c",),
        lambdas=(0.0, 100.0),
        outcome_preset="fast",
        propensity="logged",
        served_cross_fit=cross_fit,
    )
    run = run_offline(bench, X, config, progress=False)
    return {name: np.asarray(trials.utility)[0] for name, trials in run.methods.items()}, run.diagnostics[0]


def test_served_routes_where_the_prompt_tells_which_model_is_right():
    utility, diag = _run(*_bench(signal=True), cross_fit=False)  # retrain --no-cross-fit: one fit is enough here
    assert diag["served_learned_share"] == 1.0  # every tier left the fixed choice
    assert (utility["served"] > utility["single-best"] + 15).all()  # ~95 vs ~72 x100


def test_served_is_the_fixed_choice_where_the_prompt_tells_nothing():
    utility, diag = _run(*_bench(signal=False), cross_fit=True)
    assert diag["served_learned_share"] == 0.0 and diag["served_constant_is_single_best_share"] == 1.0
    np.testing.assert_allclose(utility["served"], utility["single-best"])


@pytest.mark.slow
@pytest.mark.parametrize("signal", [True, False])
def test_with_five_logs_per_prompt_served_learns_where_the_prompt_matters_and_only_there(signal):
    """Each training prompt logged five times (independent draws; the test prompts never): where the prompt
    tells which model is right, served beats the fixed choice on the unseen test prompts; where it tells
    nothing, served is the fixed choice, on every tier."""
    bench, X = _bench(signal=signal)
    utility, diag = _run(bench, X, cross_fit=True, log_draws=5)
    if signal:
        assert diag["served_learned_share"] + diag["served_regions_share"] == 1.0
        assert (utility["served"] > utility["single-best"] + 10).all(), utility
    else:
        assert diag["served_learned_share"] == 0.0 and diag["served_regions_share"] == 0.0
        np.testing.assert_allclose(utility["served"], utility["single-best"])


def _priced_bench(n_train=600, n_test=300, seed=0):
    """Two models whose answers cost their price times the prompt's tokens (100 to 50,000, log-uniform):
    `dear` (right 90% of the time, $20 per million tokens) and `cheap` (60%, $1). At lambda 10 `dear` is
    worth its price below ~1,600 tokens and `cheap` above; the embedding is noise, the size feature last."""
    from regret_gateway.context import SizeFeature

    rng = np.random.default_rng(seed)
    n = n_train + n_test
    tokens = np.exp(rng.uniform(np.log(100), np.log(50_000), size=n))
    X = SizeFeature().append(rng.normal(size=(n, 8)).astype(np.float32) / 3, tokens)
    quality = np.stack([rng.random(n) < 0.9, rng.random(n) < 0.6], axis=1).astype(float)
    bench = Benchmark(
        prompts=[f"p{i}" for i in range(n)], quality=quality, cost=np.outer(tokens, [20e-6, 1e-6]),
        model_names=("dear", "cheap"), split=np.array(["train"] * n_train + ["test"] * n_test),
        groups=np.array(["a"] * n), sample_ids=[str(i) for i in range(n)], source="synthetic",
    )  # fmt: skip
    return bench, X


def test_with_the_prompts_size_served_prices_each_request_and_beats_every_fixed_choice():
    """The priced router (each model's quality, its cost a line in the prompt's tokens) passes the gate: long
    prompts go to the cheap model, short ones to the dear one, above both fixed choices on unseen prompts.
    Without the size feature the same logs serve a fixed choice."""
    bench, X = _priced_bench()
    config = OfflineConfig(trials=1, methods=("r-and-c",), lambdas=(10.0,), outcome_preset="fast", propensity="logged",
                           size_feature=True)  # fmt: skip
    run = run_offline(bench, X, config, progress=False)
    served = float(np.asarray(run.methods["served"].utility)[0][0])
    test = bench.split == "test"
    fixed = [100 * float((bench.quality[test, t] - 10.0 * bench.cost[test, t]).mean()) for t in range(2)]
    assert served > max(fixed) + 3, (served, fixed)
    assert run.diagnostics[0]["served_learned_share"] == 1.0
    plain = run_offline(bench, X[:, :-1], OfflineConfig(trials=1, methods=("r-and-c",), lambdas=(10.0,), outcome_preset="fast",
                                                        propensity="logged"), progress=False)  # fmt: skip
    assert float(np.asarray(plain.methods["served"].utility)[0][0]) < served - 3


@pytest.mark.parametrize("max_rows", [None, 300])
def test_served_fits_on_retrains_sample_of_logs_past_its_row_cap(monkeypatch, max_rows):
    """Past ``max_rows`` the served row's retrain reads the sample retrain's window would keep (every model's
    share of the rows kept), not every logged row; ``None`` reads them all (the learning curve past the cap)."""
    from regret_gateway.data import LoggedFeedback
    from regret_gateway.evaluation.offline import served_actions
    from regret_gateway.retrain import fits

    seen = []

    def record(logs, *args, **kwargs):
        seen.append(logs)
        raise KeyboardInterrupt  # the rows are what this test reads; stop before the fit

    monkeypatch.setattr(fits, "out_of_fold_fits", record)
    rng = np.random.default_rng(0)
    action = (rng.random(1000) < 0.25).astype(int)
    logs = LoggedFeedback(X=rng.normal(size=(1000, 4)), action=action, quality=rng.random(1000),
                          cost=np.full(1000, 1e-5), model_names=("a", "b"), propensity=np.full(1000, 0.5))  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        served_actions(logs, np.zeros((2, 4)), np.array([0.0]), max_rows=max_rows)
    fitted = seen[0]
    assert fitted.n_samples == (1000 if max_rows is None else 300)
    assert np.mean(fitted.action) == pytest.approx(np.mean(action), abs=0.01)


def test_served_alone_runs_retrains_choice_without_the_bench_s_nuisance_stage():
    """``--methods served``: the served row and the references only; the bench's own nuisance stage (which the
    served row does not read) is not fitted, and the served row is what it is beside a bench method."""
    bench, X = _bench(signal=True)
    config = OfflineConfig(trials=1, methods=("served",), lambdas=(0.0, 100.0), outcome_preset="fast",
                           propensity="logged", served_cross_fit=False)  # fmt: skip
    run = run_offline(bench, X, config, progress=False)
    assert set(run.methods) == {"served", "single-best", "oracle"}
    assert "nuisance_seconds" not in run.diagnostics[0] and run.diagnostics[0]["served_learned_share"] == 1.0
    beside, _ = _run(bench, X, cross_fit=False)
    np.testing.assert_allclose(np.asarray(run.methods["served"].utility)[0], beside["served"])
