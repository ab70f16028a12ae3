"""Dev study (the test split is never read): how should the safe default's constant be chosen from the logs?
Per trial (`evaluate_on="dev"`: a held-out slice of the train prompts, never logged), K logged draws per
training prompt, retrain's cross-fitted production fits once; then per rule the constant it picks from the
out-of-fold scores, scored on the dev prompts with the true outcomes, beside the single best model (full
feedback). One JSON line per trial, rule and lambda.

    python experiments/constant_dev.py DATA TRIALS K LAMBDAS [LIMIT] > out.jsonl

Rules: `dr` (retrain's: the best mean DR utility), `dr-quality-dm-cost` (DR quality, the outcome model's
cost: a request's cost is mostly its length times a price, which the cost head predicts well, while the
DR correction of a rarely logged model's cost is noisy), `dm` (both from the outcome models), `dr-lcb`
(the best lower end of a one-standard-error band of the mean DR utility, clustered by prompt).
"""

import json
import os
import sys

import numpy as np
from dev_trials import dev_trials

from regret_gateway.causal.stats import prompt_groups
from regret_gateway.evaluation.offline import reference_actions


def clustered_se(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """(T,) standard error of each column's mean, rows of one prompt summed first."""
    _, inverse = np.unique(groups, return_inverse=True)
    sums = np.zeros((inverse.max() + 1, values.shape[1]))
    np.add.at(sums, inverse, values - values.mean(0))
    return np.sqrt((sums**2).sum(0)) / len(values)


data_path, trials, draws = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lams = [float(x) for x in sys.argv[4].split(",")]
limit = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "-" else None
for trial, split, fits in dev_trials(data_path, trials, draws, lams, limit):
    hold = fits.logged.subset(fits.order)
    true_cost = split.full_train.cost.mean(0)  # diagnostic only: each model's true mean cost on the train prompts
    true_quality = split.full_train.quality.mean(0)
    held = [learner.nuisance_.held_out(fits.logged.subset(f)) for learner, f in zip(fits.learners, fits.folds)]
    q_dr = np.concatenate([h.scores.quality for h in held])
    c_dr = np.concatenate([h.scores.cost for h in held])
    q_dm = np.concatenate([h.quality_hat for h in held])
    c_dm = np.concatenate([h.cost_hat for h in held])
    groups = prompt_groups(hold.X)
    if os.environ.get("CONSTANT_DEV_DUMP"):  # the trial's out-of-fold scores, to try rules without refitting
        np.savez(f"{os.environ['CONSTANT_DEV_DUMP']}-t{trial}.npz", q_dr=q_dr, c_dr=c_dr, q_dm=q_dm, c_dm=c_dm,
                 action=hold.action, propensity=np.concatenate([h.propensity for h in held]), groups=groups,
                 quality=hold.quality_target, cost=hold.cost, test_quality=split.full_test.quality,
                 test_cost=split.full_test.cost, train_quality=split.full_train.quality, train_cost=split.full_train.cost,
                 lams=np.array(lams))  # fmt: skip
    test = split.full_test
    single = reference_actions("single-best", split.full_train, test, lams)
    for j, lam in enumerate(lams):
        dr = q_dr - lam * c_dr
        rules = {
            "dr": dr.mean(0),
            "dr-quality-dm-cost": (q_dr - lam * c_dm).mean(0),
            "dm": (q_dm - lam * c_dm).mean(0),
            "dr-lcb": dr.mean(0) - clustered_se(dr, groups),
            "dr-quality-true-cost": q_dr.mean(0) - lam * true_cost,
            "true-quality-dr-cost": true_quality - lam * c_dr.mean(0),
        }
        true = 100 * (test.quality - lam * test.cost).mean(0)  # (T,) each model's true dev utility
        for rule, value in rules.items():
            print(json.dumps({"data": data_path, "K": draws, "trial": trial, "rule": rule, "lam": lam,
                              "chosen": int(np.argmax(value)), "utility": float(true[int(np.argmax(value))]),
                              "single_best": float(true[single[j][0]])}), flush=True)  # fmt: skip
