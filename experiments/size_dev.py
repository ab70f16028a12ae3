"""Dev study (the test split is never read): does the prompt's size beside its embedding let retrain's routers
buy cheaper models for long prompts? Per trial (`evaluate_on="dev"`), K logged draws per training prompt,
then `served` (what retrain publishes: its cross-fitted production fits and gate) twice on the same split
and logs: from the embeddings alone, and from the embeddings with the size feature appended
(:class:`regret_gateway.context.SizeFeature` of the prompt's tokens as LiteLLM counts them), where the
priced router is a candidate too. Scored on the dev
prompts with the true outcomes, beside the single best model. One JSON line per trial, variant and lambda.

    python experiments/size_dev.py DATA TRIALS K LAMBDAS [LIMIT] > out.jsonl
"""

import json
import sys

import numpy as np
from dev_trials import utility_x100

from regret_gateway.context import SizeFeature
from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial, reference_actions, served_actions
from regret_gateway.tokens import count_tokens

data_path, trials, draws = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lams = [float(x) for x in sys.argv[4].split(",")]
limit = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "-" else None
bench = load_benchmark(data_path, limit=limit, seed=0)
X = Embedder(kind="transformer", progress=False, cache_dir=default_cache_dir()).encode_unique(
    bench.prompts, datasets=bench.groups.tolist()
)
size = SizeFeature()
variants = {"embedding": X, "embedding+size": size.append(X, count_tokens(bench.prompts))}
for trial in range(trials):
    cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on="dev", log_draws=draws)
    for name, Xv in variants.items():
        split = make_trial(bench, bench.full_feedback(Xv), cfg, trial)
        test = split.full_test
        actions, candidates = served_actions(
            split.logs, test.X, np.array(lams), seed=trial, size=size if name == "embedding+size" else None
        )
        single = reference_actions("single-best", split.full_train, test, lams)
        for j, lam in enumerate(lams):
            print(json.dumps({"data": data_path, "K": draws, "trial": trial, "variant": name, "lam": lam,
                              "served": utility_x100(test, actions[j], lam), "single_best": utility_x100(test, single[j], lam),
                              "candidate": candidates[j].label}), flush=True)  # fmt: skip
