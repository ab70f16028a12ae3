"""Does the regions' cross-fitting leak? Each fold's challengers are proposed from the other folds' DR
scores, whose outcome model was fitted with the tested fold's rows among others, so the tested fold's own
noise could choose what it then tests. Null keyed worlds (8 apps x 60 prompts, each sent 4 times, six
models, every challenger exactly as good as the baseline -- or worse by GAP), IGW-like logging (the
baseline at 0.7), binary quality; the DR scores' outcome model is each (app, model)'s mean on the other
folds' rows (what an outcome model fitted there learns of a keyed world), as in retrain. Prints in how many
worlds a region departed: a leak shows as more than alpha (5%).

    python experiments/region_fold_leak.py [WORLDS] [GAP]
"""

import sys

import numpy as np

from regret_gateway.causal.stats import folds_of, prompt_groups
from regret_gateway.context import ContextCode
from regret_gateway.policy.regions import choose_regions, key_regions

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
GAP = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
K, P, REP, T = 8, 60, 4, 6


def departed(seed: int) -> int:
    rng = np.random.default_rng(seed)
    key, prompt = np.repeat(np.arange(K), P * REP), np.repeat(np.arange(K * P), REP)
    X = ContextCode("{dataset}").append(rng.normal(size=(K * P, 4)).astype(np.float32)[prompt],
                                        [{"dataset": f"app {k}"} for k in key])  # fmt: skip
    groups = prompt_groups(X)
    truth = np.full((K, T), 0.47)
    truth[:, 0] += GAP
    p = np.full(T, 0.3 / (T - 1))
    p[0] = 0.7
    a = rng.choice(T, size=len(key), p=p)
    y = (rng.random(len(key)) < truth[key, a]).astype(float)
    folds = folds_of(len(key), 5, seed, groups)
    dm = np.zeros((len(key), T))
    for rows in folds:  # each fold's outcome model: the (app, model) means of the other folds' rows
        rest = np.setdiff1d(np.arange(len(key)), rows)
        for k in range(K):
            for t in range(T):
                on = rest[(key[rest] == k) & (a[rest] == t)]
                dm[rows[key[rows] == k], t] = y[on].mean() if len(on) else 0.5
    q = dm + (a[:, None] == np.arange(T)) / p[a][:, None] * (y[:, None] - dm)
    regions = key_regions(X, groups, slice(4, X.shape[1]))
    choice = choose_regions(q, np.zeros_like(q), a, regions, groups, 0, 0.0, propensity=p[a], folds=folds,
                            aggregate=True, min_ess=25)  # fmt: skip
    return choice.n_adopted


counts = np.array([departed(seed) for seed in range(N)])
print(f"challengers {'as good as' if GAP == 0 else f'worse by {GAP}'}: a region departed in {(counts > 0).sum()} of {N} worlds")
