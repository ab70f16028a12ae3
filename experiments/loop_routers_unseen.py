"""Every router version a closed-loop replay on the LLMRouter file published, scored on all 5,608 prompts
of the file with every model's true outcome (about 80% of them never sent as traffic: the loop's traffic
is a quarter of the file, and its held-out share a fifth of that): utility x100 minus the best single
model's on the same prompts, per tier.

    python experiments/loop_routers_unseen.py runs/LOOP/regret-demo-*/artifacts [...]

The demo's own held-out columns score ~280 prompts, where a policy difference has a standard error of a
few points; this is the same question on twenty times the prompts.
"""

import sys
from pathlib import Path

import numpy as np

from regret_gateway.artifacts import load_artifact
from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark

bench = load_benchmark("../shared/data/llmrouter/llmrouter_train.csv.gz")
X = Embedder(kind="transformer", progress=False, cache_dir=default_cache_dir()).encode_unique(
    bench.prompts, datasets=bench.groups.tolist()
)
full = bench.full_feedback(X)
lams = {"premium": 0.0, "standard": 500.0, "economy": 1500.0}  # the replays' --lambdas 0,500,1500
for root in sys.argv[1:]:
    print(root)
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir() and p.name.startswith("v")):
        art = load_artifact(folder)
        row = []
        for tier, lam in lams.items():
            U = full.quality - lam * full.cost
            best = U.mean(0).max()
            pick = art.policy.choose(X, lam)
            row.append(f"{tier} {100 * (U[np.arange(len(U)), pick].mean() - best):+.2f}")
        print(f"  {folder.name}: " + ", ".join(row), f"(n={len(X)}; vs the best single model on these prompts)")
