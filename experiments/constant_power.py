"""How often can the logs pick a constant model within 0.5 of the single best one? (no networks, seconds)

Per simulated trial t -- the split and logs of `bench offline`'s trial t (`make_trial`, seed t: trials 0-4 are
the learning curve's) -- each model's mean utility is estimated from the logs (train + val prompts, K draws
each, exact propensities) by importance weighting (`ipw`), self-normalised importance weighting (`snips`)
and, for diagnosis only, a doubly robust estimate whose outcome model knows each logged prompt's true
difficulty (its mean utility over every model, which no log can know: `dr-oracle-difficulty`, a bound on
what a model of prompt difficulty could add); the argmax is taken per lambda and scored on the test prompts
against the single best model (chosen on the train prompts with full information). Across many trials:
the chance that one trial is within 0.5 on the mean over lambda, and that at least 4 of 5 independent
trials are (the learning curve's never-worse bar).

    python experiments/constant_power.py DATA LIMIT LAMBDAS K[,K...] TRIALS
    e.g. python experiments/constant_power.py ../shared/data/mmlupro 5000 0,50,100 1,3,10 200
"""

import sys
from math import comb

import numpy as np

from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial

ESTIMATORS = ("ipw", "snips", "dr-oracle-difficulty")


def estimates(logs, lam: float, n_models: int, difficulty: np.ndarray) -> dict[str, np.ndarray]:
    """Each model's estimated mean utility at ``lam``; ``difficulty`` (rows,): each logged prompt's true mean
    utility over the models (the oracle's)."""
    y, w = logs.quality - lam * logs.cost, 1.0 / logs.propensity
    hit = logs.action[:, None] == np.arange(n_models)[None, :]
    ipw = (hit * (w * y)[:, None]).sum(0) / len(y)
    snips = (hit * (w * y)[:, None]).sum(0) / np.maximum((hit * w[:, None]).sum(0), 1e-12)
    mu = snips[None, :] + (difficulty - difficulty.mean())[:, None]  # each model's mean + the prompt's difficulty
    dr = mu.mean(0) + (hit * (w * (y - mu[np.arange(len(y)), logs.action]))[:, None]).sum(0) / len(y)
    return {"ipw": ipw, "snips": snips, "dr-oracle-difficulty": dr}


def main(path: str, limit: int | None, lams: list[float], draws: list[int], trials: int) -> None:
    bench = load_benchmark(path, limit=limit, seed=0)
    full = bench.full_feedback(np.zeros((bench.n_samples, 1), dtype=np.float32))
    print(f"{path}: {bench.n_samples} prompts, {len(bench.model_names)} models, lambda {lams}, {trials} trials per K")
    print(
        "| K | estimator | mean - single best (x100) | worst | P(one trial within 0.5) | P(>= 4 of 5 within 0.5) | trials 0-4 |"
    )
    print("|---:|---|---:|---:|---:|---:|---|")
    for k in draws:
        config = OfflineConfig(lambdas=tuple(lams), trials=1, methods=("rm-cluster",), log_draws=k)
        gaps: dict[str, list[float]] = {name: [] for name in ESTIMATORS}
        for t in range(trials):
            split = make_trial(bench, full, config, seed=t)
            train, test = split.full_train, split.full_test
            logged = full.subset(np.repeat(split.pool, k))  # the logs' row j is the pool's prompt j // k
            per_lam: dict[str, list[float]] = {name: [] for name in gaps}
            for lam in lams:
                best = int(np.argmax(train.utility(lam).mean(0)))
                truth = test.utility(lam).mean(0)
                for name, est in estimates(split.logs, lam, full.n_models, logged.utility(lam).mean(1)).items():
                    per_lam[name].append(100 * (truth[int(np.argmax(est))] - truth[best]))
            for name in gaps:
                gaps[name].append(float(np.mean(per_lam[name])))
        for name, g in gaps.items():
            arr = np.array(g)
            p = float(np.mean(arr >= -0.5))
            p45 = sum(comb(5, j) * p**j * (1 - p) ** (5 - j) for j in (4, 5))
            first = ", ".join(f"{v:+.2f}" for v in arr[:5])
            print(f"| {k} | {name} | {arr.mean():+.2f} | {arr.min():+.2f} | {p:.2f} | {p45:.2f} | {first} |")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]) or None, [float(v) for v in a[2].split(",")], [int(v) for v in a[3].split(",")], int(a[4]))
