"""Dev study (the test split is never read): do outcome networks that share strength across models make
what retrain serves better? Per trial (`evaluate_on="dev"`), K logged draws per training prompt, then
`served` (retrain's cross-fitted production fits and gate) once per outcome form on the same split and logs:
the per-model networks, and the shared form (`causal/outcome.py`: one trunk, each model's output layer
shrunk toward a shared one). Scored on the dev prompts with the true outcomes, beside the single best
model and the constant the logs choose. One JSON line per trial, form and lambda.

    python experiments/outcome_dev.py DATA TRIALS K LAMBDAS [LIMIT] > out.jsonl
"""

import functools
import json
import sys

import numpy as np
from dev_trials import dev_splits, utility_x100

import regret_gateway.retrain.fits as production
from regret_gateway.evaluation.offline import reference_actions, served_actions

FORMS = {"per-model": {}, "shared": {"shared": True}}
production_learner = production.production_learner
data_path, trials, draws = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lams = [float(x) for x in sys.argv[4].split(",")]
limit = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "-" else None
for trial, split in dev_splits(data_path, trials, draws, lams, limit):
    test = split.full_test
    single = reference_actions("single-best", split.full_train, test, lams)
    for form, options in FORMS.items():
        production.production_learner = functools.partial(production_learner, outcome_options=options)
        actions, chosen = served_actions(split.logs, test.X, np.array(lams), seed=trial)
        for j, lam in enumerate(lams):
            print(json.dumps({"data": data_path, "K": draws, "trial": trial, "form": form, "lam": lam,
                              "served": utility_x100(test, actions[j], lam), "single_best": utility_x100(test, single[j], lam),
                              "candidate": chosen[j].label}), flush=True)  # fmt: skip
