"""What the gate saw with the task as the key: per trial and lambda, every candidate's estimated gain over
the safe incumbent (DR, held-out rows), the true gain over the single best model on the evaluated prompts
of what retrain serves, of each learned candidate, of the full-information ceiling and of three per-key
yardsticks (each key's best model chosen with every training outcome known, by the logs' out-of-fold DR
means, and by those means shrunk across keys), and how many regions departed. One JSON line per (trial,
lambda). The evaluated prompts are a dev slice of the training prompts (the test split never read) unless
``test`` is given; ``no-key`` drops the key (k-means regions); MIN_KEY_ESS overrides
``policy.regions.MIN_KEY_ESS``.

    python experiments/gate_power_dev.py DATA LIMIT K LAMBDAS TRIALS [key|no-key] [dev|test] [MIN_KEY_ESS] > out.jsonl
"""

import json
import sys

import numpy as np

from regret_gateway.config import TierSpec
from regret_gateway.context import ContextCode
from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial, reference_actions
from regret_gateway.policy import regions as regions_module
from regret_gateway.policy.cluster import SharedCentroids
from regret_gateway.policy.regions import shrunk_means
from regret_gateway.policy.router import TrainingData
from regret_gateway.retrain.fits import held_out_rows, out_of_fold_fits
from regret_gateway.retrain.gate import evaluate, learned_candidates
from regret_gateway.servable import unit_rows

path, limit, draws = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lams, trials = [float(x) for x in sys.argv[4].split(",")], int(sys.argv[5])
keyed = len(sys.argv) < 7 or sys.argv[6] != "no-key"  # no-key: k-means regions, the embedding alone
split_name = sys.argv[7] if len(sys.argv) > 7 else "dev"  # test: the test split (read once, never to choose on)
if len(sys.argv) > 8:  # a key's effective rows to join the whole proposal's test (policy.regions.MIN_KEY_ESS)
    regions_module.MIN_KEY_ESS = float(sys.argv[8])
bench = load_benchmark(path, limit=limit, seed=0)
code = ContextCode("{dataset}")
X = Embedder(progress=False, cache_dir=default_cache_dir()).encode_unique(bench.prompts, datasets=bench.groups.tolist())
if keyed:
    X = code.append(X, [{"dataset": g} for g in bench.groups.tolist()])
full = bench.full_feedback(X)
cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on=split_name, log_draws=draws)
for trial in range(trials):
    split = make_trial(bench, full, cfg, trial)
    fits = out_of_fold_fits(split.logs, lams, seed=trial)
    tiers = [(f"lambda={lam:g}", TierSpec(lam=lam)) for lam in lams]
    held = held_out_rows(fits, None)  # the gate's held-out rows, read again below for the per-key yardsticks
    rows, router = evaluate(fits, tiers, seed=trial, code=code if keyed else None, held=held)
    shared = SharedCentroids(unit_rows(fits.logged.X), seed=fits.learners[0].policy.random_state)
    published, _ = learned_candidates(fits.learners[0], fits.logged.model_names, lams, shared)
    dev = split.full_test
    idx = np.arange(dev.n_samples)
    single = reference_actions("single-best", split.full_train, dev, lams)
    oracle = TrainingData.from_full(split.full_train, split.full_val)
    ceiling = cfg.router("full-info-regression", trial).fit(oracle, np.array(lams)).predict(dev.X, np.array(lams))
    if keyed:
        oof = held.held[0].scores.concat(*(h.scores for h in held.held[1:]))
        block = slice(X.shape[1] - code.dim, X.shape[1])
        keys, key_log = np.unique(np.round(held.logs.X[:, block], 5), axis=0, return_inverse=True)
        key_log = key_log.reshape(-1)
        lookup = {tuple(k): i for i, k in enumerate(keys)}
        key_train = np.array([lookup[tuple(k)] for k in np.round(split.full_train.X[:, block], 5)])
        key_dev = np.array([lookup.get(tuple(k), -1) for k in np.round(dev.X[:, block], 5)])
        R, T = len(keys), dev.quality.shape[1]
        counts = np.bincount(key_log, minlength=R).astype(float)
    for j, (row, lam) in enumerate(zip(rows, lams)):
        U = 100 * (dev.quality - lam * dev.cost)
        base = U[idx, single[j]].mean()
        per_key = {}
        if keyed:
            Ut = split.full_train.quality - lam * split.full_train.cost
            full_mean = np.stack([Ut[key_train == r].mean(0) for r in range(R)])
            d = oof.quality - lam * oof.cost
            dr_mean = np.stack([np.bincount(key_log, d[:, t], minlength=R) for t in range(T)], 1) / counts[:, None]
            sq = np.stack([np.bincount(key_log, d[:, t] ** 2, minlength=R) for t in range(T)], 1) / counts[:, None]
            shrunk = shrunk_means(dr_mean, sq - dr_mean**2, counts, np.ones((R, T), bool))
            for label, table in (("keys_full_info", full_mean), ("keys_dr_argmax", dr_mean), ("keys_dr_shrunk_argmax", shrunk)):
                pick = np.argmax(table, 1)
                per_key[label] = float(U[idx, np.where(key_dev >= 0, pick[key_dev], single[j])].mean() - base)
        true = {k: float(U[idx, p.choose(dev.X, lam)].mean() - base) for k, p in published.items()}
        true["served"] = float(U[idx, router.choose(row.tier, dev.X)].mean() - base)
        true["ceiling"] = float(U[idx, ceiling[j]].mean() - base)
        true.update(per_key)
        inc = row.values[row.incumbent].dr
        est = {k: round(100 * (v.dr - inc), 2) for k, v in row.values.items()}
        print(
            json.dumps(
                {
                    "trial": trial,
                    "lam": lam,
                    "served": row.served,
                    "incumbent": row.incumbent,
                    "gain": round(100 * row.gain, 2),
                    "ci": [round(100 * c, 2) for c in row.gain_ci],
                    "regions_adopted": row.regions_adopted,
                    "regions": row.regions,
                    "estimated_gain": est,
                    "true_gain_vs_single": {k: round(v, 2) for k, v in true.items()},
                }
            ),
            flush=True,
        )
