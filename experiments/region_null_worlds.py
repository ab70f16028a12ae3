"""How often the regional safe default departs where it should not, and how often where it should:
simulated DR-like scores of three models on 12 keys x 150 prompts (unit noise, uniform logging, five folds),
the regions being the keys or k-means of six blobs. Worlds: both challengers worse than the baseline by
0.03 everywhere (a departure loses), and both better by 0.15 with one of them 0.02 ahead by key (a
departure gains); and 30 keys x 60 prompts of nine models, every challenger worse by 0.03. Prints, per world and regions, in how many of N seeds something departed and the mean
number of regions departing. The same worlds as tests/policy/test_regions.py.

    python experiments/region_null_worlds.py [N]
"""

import sys

import numpy as np

from regret_gateway.causal.stats import folds_of, prompt_groups
from regret_gateway.context import ContextCode
from regret_gateway.policy.regions import choose_regions, fit_regions, key_regions

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100


def world(gains: np.ndarray, seed: int, keyed: bool, prompts: int = 150):
    rng = np.random.default_rng(seed)
    key = np.repeat(np.arange(len(gains)), prompts)
    X = rng.normal(size=(len(key), 4)).astype(np.float32)
    X = ContextCode("{dataset}").append(X, [{"dataset": f"app {k}"} for k in key])
    groups = prompt_groups(X)
    quality = gains[key] + rng.normal(0.0, 1.0, (len(key), gains.shape[1]))
    logged = rng.integers(0, gains.shape[1], len(key))
    regions = key_regions(X, groups, slice(4, X.shape[1]))
    if not keyed:
        rng = np.random.default_rng(seed)
        centres = rng.normal(size=(6, 8)) * 4
        X = (centres[key % 6] + rng.normal(size=(len(key), 8))).astype(np.float32)
        groups = prompt_groups(X)
        regions = fit_regions(X, groups, rows_per_region=300, min_prompts_per_region=300, seed=seed)
    return quality, logged, regions, groups


worse = np.tile([0.03, 0.0, 0.0], (12, 1))
better = np.zeros((12, 3))
better[:, 1:] = 0.15
better[np.arange(12), np.random.default_rng(0).integers(1, 3, 12)] += 0.02
print("| world | regions | worlds where a region departed | regions departing (mean) |\n|---|---|---:|---:|")
small = np.concatenate([np.full((30, 1), 0.03), np.zeros((30, 8))], axis=1)  # 30 small apps, nine models
cases = [(name, gains, keyed, 150) for name, gains in (("challengers worse by 0.03", worse), ("challengers better by 0.15", better))
         for keyed in (True, False)] + [("nine models, challengers worse by 0.03", small, True, 60)]  # fmt: skip
for name, gains, keyed, prompts in cases:
    counts = []
    for seed in range(N):
        quality, logged, regions, groups = world(gains, seed, keyed, prompts)
        T = gains.shape[1]
        choice = choose_regions(quality, np.zeros_like(quality), logged, regions, groups, 0, 0.0,
                                propensity=np.full(len(logged), 1 / T), folds=folds_of(len(logged), 5, seed, groups),
                                aggregate=True, min_ess=25)  # fmt: skip
        counts.append(choice.n_adopted)
    counts = np.array(counts)
    label = f"keys ({len(gains)} x {prompts} prompts)" if keyed else f"k-means ({regions.n_regions})"
    print(f"| {name} | {label} | {int((counts > 0).sum())} of {N} | {counts.mean():.1f} |")
