"""Dev study (the test split is never read): does the request context, coded and appended to the
embedding (``embedder.context``; offline the benchmark's task stands for a team's tags), help the
log-trained routers? Per variant (plain / context), trial and lambda: the dev-slice utility x100 of the
single best model (full feedback on train), RM-Cluster, R&C and what ``served`` picks; one JSON line each.

    python experiments/context_dev.py DATA TRIALS LAMBDAS [LIMIT|-] > out.jsonl
"""

import json
import sys

import numpy as np

from regret_gateway.context import ContextCode
from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, evaluate_actions, make_trial, reference_actions, served_actions
from regret_gateway.policy.learner import fit_training_data
from regret_gateway.policy.registry import make_router

data_path, trials, lams = sys.argv[1], int(sys.argv[2]), [float(x) for x in sys.argv[3].split(",")]
limit = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] != "-" else None
bench = load_benchmark(data_path, limit=limit, seed=0)
plain = Embedder(kind="transformer", progress=False, cache_dir=default_cache_dir()).encode_unique(bench.prompts)
with_context = ContextCode("{dataset}").append(plain, [{"dataset": g} for g in bench.groups.tolist()])
lambdas = np.array(lams)
for variant, X in (("plain", plain), ("context", with_context)):
    full = bench.full_feedback(X)
    for trial in range(trials):
        seed = trial
        cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on="dev")
        split = make_trial(bench, full, cfg, seed)  # as run_offline with evaluate_on="dev"
        full_train, full_dev = split.full_train, split.full_test
        data = fit_training_data(cfg.nuisance(seed), split.logs_train, split.logs_val)
        routers = {name: make_router(name, random_state=seed).fit(data, lambdas) for name in ("rm-cluster", "r-and-c")}
        choices = {name: r.predict(full_dev.X, lambdas) for name, r in routers.items()}
        served, labels = served_actions(data, routers, choices, lambdas, seed=seed)
        single = reference_actions("single-best", full_train, full_dev, lambdas)
        utility = {
            name: evaluate_actions(full_dev, lambdas, a)["utility"]
            for name, a in (*choices.items(), ("single", single), ("served", served))
        }
        for k, lam in enumerate(lambdas):
            out = {"variant": variant, "trial": trial, "lam": float(lam), **{name: float(u[k]) for name, u in utility.items()}}
            out.update(served_label=labels[k], rm_cluster_k=int(routers["rm-cluster"].k_))
            print(json.dumps(out), flush=True)
