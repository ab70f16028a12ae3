"""Dev study (the test split is never read): should ``retrain``'s outcome networks train apart from its
policy networks? Up to 5,000 rows both train full-batch with patience 100; the full-batch vs mini-batch
study (train_config_dev.py) found R&C -- the outcome networks' argmax -- better with mini-batches and
RM-Interval worse. Here RM-Interval keeps its full-batch training and only the outcome networks (which
are R&C, the DR scores' regression term, and the gateway's exploration estimates) change. Per dataset,
trial, log size and outcome config: the time of one production fit and the dev utility of the candidates
it offers at the tier lambdas; one JSON line each (summary: train_config_summary.py).

    python docs/experiments/scripts/outcome_config_dev.py DATA TRIALS LAMBDAS SIZES [LIMIT] > out.jsonl

Dev prompts and logs as in train_config_dev.py: a seeded 30% of the prompts outside the test split are
the dev prompts; the paper's accuracy-softmax logs simulated on the rest, the first SIZE rows the logs.
"""

import json
import sys
import time

import numpy as np

from regret_gateway.causal.estimators import DoublyRobust, Nuisance
from regret_gateway.causal.outcome import OutcomeModel
from regret_gateway.causal.propensity import LoggedPropensity
from regret_gateway.embedding import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.simulation import simulate_logs
from regret_gateway.nn.training import TrainConfig
from regret_gateway.policy import candidates
from regret_gateway.policy.learner import Learner
from regret_gateway.policy.tiers import RMInterval

POLICY = TrainConfig(patience=100)  # what retrain uses up to 5,000 rows, for both
OUTCOME = {
    "full-batch-p100": TrainConfig(patience=100),  # used
    "full-batch-p20": TrainConfig(patience=20),
    "batch-512": TrainConfig(batch_size=512, max_epochs=100, patience=10),
    "batch-1024": TrainConfig(batch_size=1024, max_epochs=40, patience=5),
    "full-batch-wd": TrainConfig(patience=100, weight_decay=1e-2),
}

data_path, trials, lams = sys.argv[1], int(sys.argv[2]), [float(x) for x in sys.argv[3].split(",")]
sizes = [int(x) for x in sys.argv[4].split(",")]
limit = int(sys.argv[5]) if len(sys.argv) > 5 else None
bench = load_benchmark(data_path, limit=limit, seed=0)
X = Embedder(progress=False, cache_dir=default_cache_dir()).encode_unique(bench.prompts)
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
        for name, outcome_config in OUTCOME.items():

            def learner_with(n_rows, tier_lams, *, imported, seed=0, outcome_config=outcome_config):
                nuisance = Nuisance(propensity=LoggedPropensity(), outcome=OutcomeModel(train=outcome_config),
                                    estimator=DoublyRobust(), random_state=seed)  # fmt: skip
                return Learner(nuisance=nuisance, policy=RMInterval(tiers=sorted(tier_lams), train=POLICY, random_state=seed))

            candidates.production_learner = learner_with  # fit_router builds its learner with this config
            t0 = time.perf_counter()
            learner = candidates.fit_router(logs, lams, seed=trial)
            seconds = time.perf_counter() - t0
            offered, k = candidates.learned_candidates(learner, logs.model_names, lams)
            for label, policy in offered.items():
                util = [
                    float(100 * truth.utility(lam)[np.arange(truth.n_samples), policy.choose(truth.X, lam)].mean())
                    for lam in lams
                ]
                print(json.dumps({"data": data_path, "trial": trial, "rows": n, "config": name, "seconds": round(seconds, 1),
                                  "candidate": label, "k": k, "utility": util, "mean": float(np.mean(util)),
                                  "single_best_mean": float(np.mean(list(single.values())))}), flush=True)  # fmt: skip
