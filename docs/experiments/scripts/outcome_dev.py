"""Dev study (the test split is never read): do outcome networks that share strength across models make
what retrain serves better? Per trial (`evaluate_on="dev"`), K logged draws per training prompt, then
`served` (retrain's cross-fitted production fits and gate) once per outcome form on the same split and logs:
the per-model networks, and the shared form (`causal/outcome.py`: one trunk, each model's output layer
shrunk toward a shared one). Scored on the dev prompts with the true outcomes, beside the single best
model and the constant the logs choose. One JSON line per trial, form and lambda.

    python docs/experiments/scripts/outcome_dev.py DATA TRIALS K LAMBDAS [LIMIT] > out.jsonl
"""

import functools
import json
import sys

import numpy as np

from regret_gateway.embedding import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial, reference_actions, served_actions
from regret_gateway.policy import candidates

FORMS = {"per-model": {}, "shared": {"shared": True}}
production_learner = candidates.production_learner
data_path, trials, draws = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lams = [float(x) for x in sys.argv[4].split(",")]
limit = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "-" else None
bench = load_benchmark(data_path, limit=limit, seed=0)
X = Embedder(progress=False, cache_dir=default_cache_dir()).encode_unique(bench.prompts, datasets=bench.groups.tolist())
full = bench.full_feedback(X)
for trial in range(trials):
    cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on="dev", log_draws=draws)
    split = make_trial(bench, full, cfg, trial)
    test = split.full_test
    single = reference_actions("single-best", split.full_train, test, lams)
    rows = np.arange(test.n_samples)
    for form, options in FORMS.items():
        candidates.production_learner = functools.partial(production_learner, outcome_options=options)
        actions, chosen = served_actions(split.logs, test.X, np.array(lams), seed=trial)
        for j, lam in enumerate(lams):
            def u(a, lam=lam, test=test, rows=rows):
                return 100 * float((test.quality[rows, a] - lam * test.cost[rows, a]).mean())

            print(json.dumps({"data": data_path, "K": draws, "trial": trial, "form": form, "lam": lam,
                              "served": u(actions[j]), "single_best": u(single[j]),
                              "candidate": chosen[j].label}), flush=True)  # fmt: skip
