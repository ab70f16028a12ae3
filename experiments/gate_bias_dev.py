"""Dev study: are the gate's DR values right? ``retrain``'s cross-fitted evaluation
(``retrain.fits.out_of_fold_fits`` + ``evaluate``) on each trial's simulated logs, one tier per lambda; for
every candidate its DR value on the logged rows (out of fold) and its true value on the same rows (the
benchmark has every model's outcome on every logged prompt), and the gain of the best challenger over the
incumbent, estimated (with its interval) and true. One JSON line per trial, lambda and candidate. The test
split is not read.

    python experiments/gate_bias_dev.py DATA TRIALS LAMBDAS [LIMIT] > out.jsonl
"""

import json
import sys

import numpy as np

from regret_gateway.config import TierSpec
from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial
from regret_gateway.retrain.fits import out_of_fold_fits
from regret_gateway.retrain.gate import FIXED, evaluate, learned_candidates

data_path, trials, lams = sys.argv[1], int(sys.argv[2]), [float(x) for x in sys.argv[3].split(",")]
limit = int(sys.argv[4]) if len(sys.argv) > 4 else None
bench = load_benchmark(data_path, limit=limit, seed=0)
X = Embedder(kind="transformer", progress=False, cache_dir=default_cache_dir()).encode_unique(bench.prompts)
full = bench.full_feedback(X)
for trial in range(trials):
    cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on="dev")
    split = make_trial(bench, full, cfg, trial)
    logs, truth = split.logs, full.subset(split.pool)  # the logs are simulated on the pool, row for row
    fits = out_of_fold_fits(logs, lams, seed=trial)
    tiers = [(f"lambda={lam:g}", TierSpec(lam=lam)) for lam in lams]
    rows, _ = evaluate(fits, tiers, seed=trial)
    order, names = fits.order, logs.model_names
    parts = [logs.subset(f) for f in fits.folds]
    offered = [learned_candidates(learner, names, lams)[0] for learner in fits.learners]
    T = truth.subset(order)
    for row in rows:
        lam = row.lam
        actions = {}
        for label in row.values:
            if label.startswith(FIXED):
                actions[label] = np.full(len(order), names.index(label.split(":", 1)[1]))
            else:
                actions[label] = np.concatenate([fold[label].choose(p.X, lam) for fold, p in zip(offered, parts)])
        true = {
            k: float((T.quality[np.arange(len(a)), a] - lam * T.cost[np.arange(len(a)), a]).mean()) for k, a in actions.items()
        }
        best = max(row.values, key=lambda k: row.values[k].dr)
        for label, value in row.values.items():
            print(json.dumps({"data": data_path, "trial": trial, "lam": lam, "candidate": label, "incumbent": row.incumbent,
                              "served": row.served, "best": best, "dr": 100 * value.dr, "true": 100 * true[label],
                              "gain": 100 * row.gain, "gain_lo": 100 * row.gain_ci[0], "gain_hi": 100 * row.gain_ci[1],
                              "true_gain": 100 * (true[best] - true[row.incumbent])}), flush=True)  # fmt: skip
