"""One production fit (`fit_router`: mini-batches past 5,000 rows) on logs shaped like `bench retrain`'s
synthetic ones (4 models, 4 prompt families, epsilon-greedy logging with exact propensities), the
per-model and the shared outcome networks alternating in one process, two rounds: seconds each.

    python experiments/outcome_fit_time.py 80000
"""

import functools
import sys
import time

import numpy as np

import regret_gateway.retrain.fits as production
from regret_gateway.bench.retrain_timing import COST, MODELS
from regret_gateway.data import LoggedFeedback

n, dim = int(sys.argv[1]), 384
rng = np.random.default_rng(0)
centers = rng.normal(size=(4, dim)).astype(np.float32)
family = rng.integers(4, size=n)
X = centers[family] + rng.normal(size=(n, dim)).astype(np.float32)
X /= np.linalg.norm(X, axis=1, keepdims=True)
p = np.full((n, 4), 0.3)
p[np.arange(n), family] = 0.9
p[:, 3] = 0.92
explore = rng.random(n) < 0.2
action = np.where(explore, rng.integers(4, size=n), family)
prop = 0.05 + 0.8 * (action == family)
q = (rng.random(n) < p[np.arange(n), action]).astype(float)
logs = LoggedFeedback(X=X, action=action, quality=q, cost=np.array(COST)[action], model_names=tuple(MODELS), propensity=prop)
base = production.production_learner
for rep in range(2):
    for form in ("per-model", "shared"):
        production.production_learner = functools.partial(base, outcome_options={"shared": form == "shared"})
        t = time.perf_counter()
        production.fit_router(logs, [0.0, 200.0, 1000.0], seed=0)
        print(form, rep, round(time.perf_counter() - t, 1), "s", flush=True)
