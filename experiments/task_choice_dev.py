"""Dev study (the test split is never read): what is the task worth to a policy learned from logs? Per
trial and lambda, the dev-slice utility x100 of: the single best model (full feedback on train), the logs'
best constant, the best model per task from the tasks' mean DR scores (raw and shrunk by empirical Bayes),
RM-Cluster on the plain embedding, and what a gate picks between the constant and the per-task policy
(on the validation logs; cross-fitted over every logged row). One JSON line each.

    python experiments/task_choice_dev.py DATA TRIALS LAMBDAS [LIMIT] > out.jsonl
"""

import json
import sys

import numpy as np

from regret_gateway.causal.ope import LoggedData
from regret_gateway.causal.selection import select
from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial, reference_actions
from regret_gateway.policy.cluster import RMCluster, shrunk_means
from regret_gateway.policy.learner import fit_training_data

data_path, trials, lams = sys.argv[1], int(sys.argv[2]), [float(x) for x in sys.argv[3].split(",")]
limit = int(sys.argv[4]) if len(sys.argv) > 4 else None
bench = load_benchmark(data_path, limit=limit, seed=0)
X = Embedder(kind="transformer", progress=False, cache_dir=default_cache_dir()).encode_unique(bench.prompts)
full = bench.full_feedback(X)
lambdas = np.array(lams)
groups_all = np.asarray(bench.groups, dtype=object)
for trial in range(trials):
    seed = trial
    cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on="dev")
    rng = np.random.default_rng(seed)
    split = make_trial(bench, full, cfg, seed, rng)  # rng draws on below (the cross-fitting folds)
    train, test, pool, logs = split.train, split.test, split.pool, split.logs
    logs_train, logs_val, full_train, full_test = split.logs_train, split.logs_val, split.full_train, split.full_test
    nuisance = cfg.nuisance(seed)
    data = fit_training_data(nuisance, logs_train, logs_val)
    dr = data.scores.concat(data.val_scores)  # raw DR (unclipped quality/cost)
    g_pool, g_test = groups_all[pool], groups_all[test]
    names = sorted(set(g_pool))
    idx = {g: i for i, g in enumerate(names)}
    a_pool = np.array([idx[g] for g in g_pool])
    a_test = np.array([idx.get(g, -1) for g in g_test])
    a_val = a_pool[len(train) :]
    K = len(names)
    qs, cs = shrunk_means(dr.quality, a_pool, K), shrunk_means(dr.cost, a_pool, K)
    qr = np.stack([dr.quality[a_pool == k].mean(0) for k in range(K)])
    cr = np.stack([dr.cost[a_pool == k].mean(0) for k in range(K)])
    rmc = RMCluster(random_state=seed).fit(data, lambdas)
    sb = reference_actions("single-best", full_train, full_test, lambdas)
    rows_t = np.arange(len(test))
    U = lambda acts, l, full_test=full_test, rows_t=rows_t: (
        100
        * float(  # noqa: E731
            (full_test.quality[rows_t, acts] - l * full_test.cost[rows_t, acts]).mean()
        )
    )
    q_hat, c_hat = nuisance.outcome_.predict(logs_val.X)
    held = LoggedData(logs_val.action, logs_val.quality, logs_val.cost, logs_val.propensity, q_hat, c_hat)
    # cross-fitted gain of per-task over constant on all pooled rows: fold means from other folds
    folds = rng.integers(0, 5, len(pool))
    for k, lam in enumerate(lambdas):
        const = dr.best_constant(lam)
        ctx_s = np.argmax(qs - lam * cs, 1)
        ctx_r = np.argmax(qr - lam * cr, 1)
        pick = lambda table, a_test=a_test, const=const: np.where(a_test >= 0, table[np.maximum(a_test, 0)], const)  # noqa: E731
        row = {
            "trial": trial,
            "lam": lam,
            "single": U(sb[k], lam),
            "const": U(np.full(len(test), const), lam),
            "ctx_shrunk": U(pick(ctx_s), lam),
            "ctx_raw": U(pick(ctx_r), lam),
            "rm_cluster": U(rmc.predict(full_test.X, [lam])[0], lam),
            "rmc_k": int(rmc.k_),
        }
        sel = select(held, {"c": np.full(len(a_val), const), "g": ctx_s[a_val]}, "c", lam, n_boot=300, seed=seed)
        row["gate_val"] = row["ctx_shrunk"] if sel.served == "g" else row["const"]
        u = dr.quality - lam * dr.cost
        diff = np.zeros(len(pool))
        for f in range(5):
            tr, ho = folds != f, folds == f
            qf, cf = shrunk_means(dr.quality[tr], a_pool[tr], K), shrunk_means(dr.cost[tr], a_pool[tr], K)
            cst = int(np.argmax(u[tr].mean(0)))
            pol = np.argmax(qf - lam * cf, 1)[a_pool[ho]]
            diff[ho] = u[ho][np.arange(ho.sum()), pol] - u[ho][:, cst]
        b = rng.integers(0, len(diff), (300, len(diff)))
        lo = np.percentile(diff[b].mean(1), 2.5)
        row["cf_gain"] = 100 * diff.mean()
        row["cf_lo"] = 100 * lo
        row["gate_cf"] = row["ctx_shrunk"] if lo > 0 else row["const"]
        print(json.dumps(row), flush=True)
