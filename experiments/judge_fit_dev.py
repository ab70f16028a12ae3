"""Dev study (the test split is never read): what a noisy judge's scores teach one production fit, with the
outcome networks fitted on its scores as they are (retrain's default) or through the judge's measured error
(``OutcomeModel(judge_error=True)``, ``causal/outcome.py``); the DR targets are corrected either way. Per trial a dev split (`evaluate_on="dev"`), K
logged draws per training prompt; every logged score is flipped at rate E (a judge wrong at E), and the
error is measured as retrain would on PAIRS rows a user also scored (binomial draws around E). One fit per
arm on the same logs (``fit_router``: RM-Interval, RM-Cluster, R&C), each candidate scored on the dev
prompts with the true outcomes; the direct arm fits the true scores. One JSON line per trial, arm, lambda.

    python experiments/judge_fit_dev.py DATA TRIALS K E LAMBDAS [LIMIT] [PAIRS] > out.jsonl
    python experiments/judge_fit_dev.py --summary out.jsonl   # mean over trials and lambdas
"""

import functools
import json
import sys
from dataclasses import replace

import numpy as np
from dev_trials import dev_splits, utility_x100

import regret_gateway.retrain.fits as production
from regret_gateway.data import TargetErrors, corrected_score
from regret_gateway.evaluation.offline import reference_actions
from regret_gateway.retrain.gate import learned_candidates

if sys.argv[1] == "--summary":
    rows = [json.loads(line) for line in open(sys.argv[2])]
    labels = ("rm-interval", "rm-cluster", "r-and-c")
    print("| arm | trials | " + " | ".join(f"{k} - single best" for k in labels) + " | R&C per trial |")
    print("|---|---:|" + "---:|" * (len(labels) + 1))
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mine = [r for r in rows if r["arm"] == arm]
        trials = sorted({r["trial"] for r in mine})
        per = {t: np.mean([r["r-and-c"] - r["single_best"] for r in mine if r["trial"] == t]) for t in trials}
        gaps = [np.mean([r[k] - r["single_best"] for r in mine]) for k in labels]
        print(f"| {arm} | {len(trials)} | " + " | ".join(f"{g:+.2f}" for g in gaps) + " | "
              + ", ".join(f"{v:+.2f}" for v in per.values()) + " |")  # fmt: skip
    sys.exit()
data_path, trials, draws, e = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
lams = [float(x) for x in sys.argv[5].split(",")]
limit = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[6] != "-" else None
pairs = int(sys.argv[7]) if len(sys.argv) > 7 else 600
production_learner = production.production_learner
for trial, split in dev_splits(data_path, trials, draws, lams, limit):
    logs, test = split.logs, split.full_test
    rng = np.random.default_rng([trial, 0x1D6E])
    truth = np.asarray(logs.quality)
    raw = np.where(rng.random(len(truth)) < e, 1.0 - truth, truth)
    failed = passed = pairs // 2  # the users' pairs the error is measured on, half failed and half passed
    fp, ff = rng.binomial(failed, e) / failed, rng.binomial(passed, e) / passed
    errors = TargetErrors(group=np.zeros(len(raw), dtype=int), raw=raw, false_pass=np.array([fp]), false_fail=np.array([ff]),
                          failed=np.array([failed]), passed=np.array([passed]), repeats=np.array([0]), disagree=np.array([0.0]))  # fmt: skip
    judged = replace(logs, quality=raw, target=corrected_score(raw, fp, ff), target_errors=errors)
    single = reference_actions("single-best", split.full_train, test, lams)
    for arm, arm_logs, through in (("direct", logs, False), ("through the error", judged, True), ("as scored", judged, False)):
        options = {"judge_error": through}
        production.production_learner = functools.partial(production_learner, outcome_options=options)
        learner = production.fit_router(arm_logs, lams, seed=trial)
        policies, _ = learned_candidates(learner, logs.model_names, lams)
        for lam, best in zip(lams, single):
            row = {"data": data_path, "K": draws, "e": e, "trial": trial, "arm": arm, "lam": lam,
                   "single_best": utility_x100(test, best, lam), "measured": [fp, ff]}  # fmt: skip
            row.update({label: utility_x100(test, p.choose(test.X, lam), lam) for label, p in policies.items()})
            print(json.dumps(row), flush=True)
