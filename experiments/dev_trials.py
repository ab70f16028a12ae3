"""The trials the dev studies share (`regions_dev.py`, `constant_dev.py`, `outcome_dev.py`): the benchmark
embedded once, then per trial a dev split (`evaluate_on="dev"`: a held-out slice of the train prompts, never
logged, the test split never read), K logged draws per training prompt and (`dev_trials`) retrain's
cross-fitted production fits."""

import numpy as np

from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial
from regret_gateway.retrain.fits import out_of_fold_fits


def dev_splits(data_path: str, trials: int, draws: int, lams: list[float], limit: int | None):
    """Yield ``(trial, split)`` for each trial."""
    bench = load_benchmark(data_path, limit=limit, seed=0)
    X = Embedder(kind="transformer", progress=False, cache_dir=default_cache_dir()).encode_unique(
        bench.prompts, datasets=bench.groups.tolist()
    )
    full = bench.full_feedback(X)
    for trial in range(trials):
        cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on="dev", log_draws=draws)
        yield trial, make_trial(bench, full, cfg, trial)


def dev_trials(data_path: str, trials: int, draws: int, lams: list[float], limit: int | None):
    """Yield ``(trial, split, fits)`` for each trial."""
    for trial, split in dev_splits(data_path, trials, draws, lams, limit):
        yield trial, split, out_of_fold_fits(split.logs, lams, seed=trial)


def utility_x100(test, actions: np.ndarray, lam: float) -> float:
    """Mean utility x100 of ``actions`` (one model index per dev prompt) with the true outcomes of ``test``."""
    rows = np.arange(test.n_samples)
    return 100 * float((test.quality[rows, actions] - lam * test.cost[rows, actions]).mean())
