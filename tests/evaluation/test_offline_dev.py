"""``--evaluate-on dev`` chooses settings without reading the test split: a held-out slice of train is
scored instead, and it is kept out of the logs, the training and the served choice."""

import numpy as np

from regret_gateway.evaluation.loaders import Benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial, run_offline


def _bench(n_train=240, n_test=60, seed=0):
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    code = np.arange(n) % 2 == 0
    quality = np.stack([code & (rng.random(n) < 0.9), rng.random(n) < 0.8], axis=1).astype(float)
    cost = np.tile([1e-5, 1e-3], (n, 1))
    split = np.array(["train"] * n_train + ["test"] * n_test)
    X = np.stack([code.astype(float), 1 - code, rng.normal(size=n)], axis=1).astype(np.float32)
    bench = Benchmark(
        prompts=[f"p{i}" for i in range(n)], quality=quality, cost=cost, model_names=("small", "large"), split=split,
        groups=np.array(["a"] * n), sample_ids=[str(i) for i in range(n)], source="synthetic",
    )  # fmt: skip
    return bench, X


def test_dev_scores_a_held_out_train_slice_and_never_reads_test():
    bench, X = _bench()
    is_test = bench.split == "test"
    flipped = Benchmark(**{**bench.__dict__, "quality": np.where(is_test[:, None], 1 - bench.quality, bench.quality)})
    config = dict(
        trials=1, methods=("r-and-c",), lambdas=(0.0, 100.0), outcome_preset="fast", propensity="logged", served_cross_fit=False
    )

    def utilities(b, evaluate_on):
        run = run_offline(b, X, OfflineConfig(evaluate_on=evaluate_on, **config), progress=False)
        return run, {name: trials.utility for name, trials in run.methods.items()}

    dev, before = utilities(bench, "dev")
    assert utilities(flipped, "dev")[1] == before  # what the test rows hold changes nothing
    # the held-out slice is as large as the validation slice and came out of train
    assert dev.dataset["n_test"] == dev.dataset["n_val"] and dev.dataset["n_train"] + 2 * dev.dataset["n_val"] == 240
    assert utilities(flipped, "test")[1] != utilities(bench, "test")[1]  # while scoring test reads them


def test_a_dev_trial_keeps_its_slice_out_of_train_val_and_the_logs():
    bench, X = _bench()
    full = bench.full_feedback(X)
    trial = make_trial(bench, full, OfflineConfig(evaluate_on="dev"), seed=3)
    assert not set(trial.test) & set(trial.pool) and not np.isin(np.flatnonzero(bench.split == "test"), trial.test).any()
    assert len(trial.test) == len(trial.val) and len(trial.pool) + len(trial.test) == 240
    np.testing.assert_array_equal(trial.logs.X, X[trial.pool])  # logged on train then val, in that order
    np.testing.assert_array_equal(trial.logs_val.X, X[trial.val])
    np.testing.assert_array_equal(trial.full_test.X, X[trial.test])
    again = make_trial(bench, full, OfflineConfig(evaluate_on="dev"), seed=3)
    np.testing.assert_array_equal(again.logs.action, trial.logs.action)  # the seed fixes split and logs
