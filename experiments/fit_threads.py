"""Time of one production fit (``retrain.fits.fit_router``: outcome MLPs, DR scores, RM-Interval over three tiers)
on N synthetic logged rows (384-d, 16 models), once per torch thread count given; run two at once to see
what sharing the cores costs.

    python experiments/fit_threads.py 4800 1,2,1,2
"""

import sys
import time

import numpy as np
import torch

from regret_gateway.data import LoggedFeedback
from regret_gateway.retrain.fits import fit_router

n, d, T = int(sys.argv[1]), 384, 16
threads = [int(x) for x in sys.argv[2].split(",")]
rng = np.random.default_rng(0)
X = rng.normal(size=(n, d))
X /= np.linalg.norm(X, axis=1, keepdims=True)
W = rng.normal(size=(d, T)) * 3
pq = 1 / (1 + np.exp(-(X @ W)))
a = rng.integers(T, size=n)
q = (rng.random(n) < pq[np.arange(n), a]).astype(float)
c = np.linspace(1e-4, 7e-3, T)[a] * rng.uniform(0.5, 1.5, n)
logged = LoggedFeedback(
    X=X, action=a, quality=q, cost=c, model_names=tuple(f"m{i}" for i in range(T)), propensity=np.full(n, 1 / T)
)
for t in threads:
    torch.set_num_threads(t)
    t0 = time.perf_counter()
    fit_router(logged, [0.0, 20.0, 100.0])
    print(f"rows {n} threads {t}: {time.perf_counter() - t0:.1f} s", flush=True)
