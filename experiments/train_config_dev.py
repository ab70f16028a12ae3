"""Dev study (the test split is never read): how should ``retrain`` train its networks on a few thousand
logged rows? Per dataset, trial, log size and training config: the time of one production fit
(``policy.production.fit_router``: outcome models, DR scores, RM-Interval) and the dev utility of the
candidates it offers (RM-Interval, R&C, RM-Cluster) at the tier lambdas; one JSON line each.

* default: every network full-batch with patience 100 (what ``retrain`` does up to 5,000 rows) or in
  mini-batches (what it does beyond);
* ``--outcome-only``: RM-Interval keeps full-batch with patience 100, only the outcome networks (R&C, the
  DR scores' regression term, the gateway's exploration estimates) train otherwise;
* ``--shared``: the same, the per-model outcome networks against the shared form (one trunk for every
  model; ``causal/outcome.py``) at two shrinkages.

    python experiments/train_config_dev.py [--outcome-only | --shared] DATA TRIALS LAMBDAS SIZES [LIMIT] > out.jsonl
    python experiments/train_config_summary.py out.jsonl ...

The dev prompts: a seeded 30% of the prompts outside the test split; the logs: the paper's
accuracy-softmax logging policy simulated on the rest, of which the first SIZE rows (a seeded order) are
the retrain's logs.
"""

import functools
import json
import sys
import time

import numpy as np

import regret_gateway.retrain.fits as production
from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.nn.training import TrainConfig
from regret_gateway.retrain.gate import learned_candidates

USED = TrainConfig(patience=100)  # retrain's, up to 5,000 rows
CONFIGS = {
    "full-batch-p100": USED,
    "batch-1024": TrainConfig(batch_size=1024, max_epochs=40, patience=5),
    "batch-512": TrainConfig(batch_size=512, max_epochs=100, patience=10),
}
OUTCOME_CONFIGS = {  # --outcome-only
    **CONFIGS,
    "full-batch-p20": TrainConfig(patience=20),
    "full-batch-wd": TrainConfig(patience=100, weight_decay=1e-2),
}
# --shared: the per-model outcome networks (retrain's) against the shared form (causal/outcome.py: one trunk,
# each model's output layer shrunk toward a shared one), RM-Interval as retrain trains it
SHARED_CONFIGS = {
    "per-model": (USED, {}),
    "shared": (USED, {"shared": True, "shrink": 1.0}),
    "shared-shrink-10": (USED, {"shared": True, "shrink": 10.0}),
}

production_learner = production.production_learner
args = sys.argv[1:]
outcome_only = "--outcome-only" in args
shared = "--shared" in args
args = [a for a in args if a not in ("--outcome-only", "--shared")]
data_path, trials, lams = args[0], int(args[1]), [float(x) for x in args[2].split(",")]
sizes = [int(x) for x in args[3].split(",")]
limit = int(args[4]) if len(args) > 4 else None
bench = load_benchmark(data_path, limit=limit, seed=0)
X = Embedder(kind="transformer", progress=False, cache_dir=default_cache_dir()).encode_unique(bench.prompts)
full = bench.full_feedback(X)
outside_test = np.flatnonzero(bench.split != "test")
for trial in range(trials):
    rng = np.random.default_rng(trial)
    order = rng.permutation(outside_test)
    n_dev = int(0.3 * len(order))
    dev, pool = np.sort(order[:n_dev]), order[n_dev:]
    logs_all = simulate_logs(full.subset(pool), policy="accuracy-softmax", temperature=1.0, seed=trial)
    truth = full.subset(dev)
    single = {lam: float(100 * truth.utility(lam).mean(0)[np.argmax(full.subset(pool).utility(lam).mean(0))]) for lam in lams}
    for n in sizes:
        if n > len(pool):
            continue
        logs = logs_all.subset(np.arange(n))
        if shared:
            settings = SHARED_CONFIGS
        else:
            settings = {k: (c, {}) for k, c in (OUTCOME_CONFIGS if outcome_only else CONFIGS).items()}
        for name, (config, options) in settings.items():
            policy_config = USED if outcome_only or shared else config
            # fit_router builds the production learner with the study's configs
            production._train_config = lambda rows, policy_config=policy_config: policy_config
            production.production_learner = functools.partial(production_learner, outcome_train=config, outcome_options=options)
            t0 = time.perf_counter()
            learner = production.fit_router(logs, lams, seed=trial)
            seconds = time.perf_counter() - t0
            offered, k = learned_candidates(learner, logs.model_names, lams)
            for label, policy in offered.items():
                util = [
                    float(100 * truth.utility(lam)[np.arange(truth.n_samples), policy.choose(truth.X, lam)].mean())
                    for lam in lams
                ]
                print(json.dumps({"data": data_path, "trial": trial, "rows": n, "config": name, "seconds": round(seconds, 1),
                                  "candidate": label, "k": k, "utility": util, "mean": float(np.mean(util)),
                                  "single_best_mean": float(np.mean(list(single.values())))}), flush=True)  # fmt: skip
