"""Dev study (the test split is never read): which estimate of each model's mean utility from the logs
picks the best fixed model? Per trial and lambda, the dev-slice utility of the model each estimator picks
and of the full-feedback single best model; one JSON line each.

    python experiments/fixed_choice_dev.py DATA TRIALS LAMBDAS [LIMIT] > out.jsonl
    python experiments/fixed_choice_summary.py out.jsonl
"""

import json
import sys

import numpy as np

from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial, reference_actions
from regret_gateway.policy.learner import fit_training_data

data_path, trials, lams = sys.argv[1], int(sys.argv[2]), [float(x) for x in sys.argv[3].split(",")]
limit = int(sys.argv[4]) if len(sys.argv) > 4 else None
bench = load_benchmark(data_path, limit=limit, seed=0)
X = Embedder(kind="transformer", progress=False, cache_dir=default_cache_dir()).encode_unique(bench.prompts)
full = bench.full_feedback(X)
lambdas = np.array(lams)
for trial in range(trials):
    seed = trial
    cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on="dev")
    split = make_trial(bench, full, cfg, seed)
    logs, logs_train, logs_val = split.logs, split.logs_train, split.logs_val
    full_train, full_test = split.full_train, split.full_test
    nuisance = cfg.nuisance(seed)
    data = fit_training_data(nuisance, logs_train, logs_val)
    dr = data.scores.concat(data.val_scores)
    T = logs.n_models
    onehot = np.eye(T)[logs.action] / logs.propensity[:, None]  # (n, T) IPS weights
    q_all, c_all = nuisance.outcome_.predict(logs.X)
    truth = full.subset(np.concatenate([split.train, split.val]))  # every model's outcome on the logged prompts
    snips_cost = (onehot * logs.cost[:, None]).sum(0) / onehot.sum(0)
    err = {  # how far each estimate of a model's mean is from the truth on the logged prompts (RMSE over models)
        "quality_dr": dr.quality.mean(0) - truth.quality.mean(0),
        "cost_dr": dr.cost.mean(0) - truth.cost.mean(0),
        "cost_dm": c_all.mean(0) - truth.cost.mean(0),
        "cost_snips": snips_cost - truth.cost.mean(0),
    }
    print(json.dumps({"trial": trial, "diagnostic": True, "lam_max": float(lambdas.max()),
                      **{k: float(np.sqrt((v**2).mean())) for k, v in err.items()}}), flush=True)  # fmt: skip
    sb = reference_actions("single-best", full_train, full_test, lambdas)
    testU = lambda t, l, full_test=full_test: 100 * float((full_test.quality[:, t] - l * full_test.cost[:, t]).mean())
    for k, lam in enumerate(lambdas):
        y = logs.quality - lam * logs.cost
        u = dr.quality - lam * dr.cost  # (n, T) DR utility scores of every logged row
        se = u.std(0, ddof=1) / np.sqrt(len(u))
        est = {
            "dr_insample": (dr.quality - lam * dr.cost).mean(0),
            "dr_clipped": dr.utility(lam).mean(0),
            "dr_clip_1_99": np.clip(dr.quality - lam * dr.cost, *np.percentile(dr.quality - lam * dr.cost, (1, 99), axis=0)).mean(
                0
            ),
            "dr_median_of_means": np.median(np.stack([(dr.quality - lam * dr.cost)[i::10].mean(0) for i in range(10)]), axis=0),
            "ips": (onehot * y[:, None]).mean(0),
            "snips": (onehot * y[:, None]).sum(0) / onehot.sum(0),
            "dm": (q_all - lam * c_all).mean(0),
            "dr_val_only": (data.val_scores.quality - lam * data.val_scores.cost).mean(0),
            "dr_lcb_1se": u.mean(0) - se,  # pessimistic: the best lower bound, not the best estimate
            "dr_lcb_2se": u.mean(0) - 2 * se,
            "dr_quality_dm_cost": dr.quality.mean(0) - lam * c_all.mean(0),  # cost from the outcome model alone
            "dr_quality_snips_cost": dr.quality.mean(0) - lam * snips_cost,
        }
        row = {"trial": trial, "lam": lam, "single": testU(int(sb[k][0]), lam)}
        row.update({name: testU(int(np.argmax(v)), lam) for name, v in est.items()})
        print(json.dumps(row), flush=True)
