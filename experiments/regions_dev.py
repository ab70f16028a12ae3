"""Dev study (the test split is never read): how large should the safe default's regions be, and at what
family-wise level should a region's gain be proven? Per trial (`evaluate_on="dev"`: a held-out slice of
the train prompts, never logged), K logged draws per training prompt, retrain's cross-fitted production
fits once, then per setting the regional policy of :mod:`regret_gateway.policy.regions` over the logs'
best constant, scored on the dev prompts with the true outcomes; beside it the single best model (full
feedback) and the logs' best constant. One JSON line per trial, setting and lambda.

    python experiments/regions_dev.py DATA TRIALS K LAMBDAS [LIMIT] [SETTINGS] > out.jsonl

SETTINGS (optional): semicolon-separated `rows_per_region,alpha,honest,aggregate`, e.g. "2400,0.05,1,1;8000,0.05,1,1"
(default: the grid below; the minimum of distinct prompts per region is set to 1 here, so that only the
rows decide). LIMIT may be "-" for every prompt.
"""

import json
import sys

import numpy as np
from dev_trials import dev_trials

from regret_gateway.causal.stats import prompt_groups
from regret_gateway.evaluation.offline import reference_actions
from regret_gateway.policy.regions import choose_regions, fit_regions
from regret_gateway.servable import nearest_centroid

# rows per region (at K = 3: 200, 400, 800 distinct prompts per region), family-wise alpha, challengers chosen on the
# other folds (honest), and the whole proposal tested first (aggregate)
SETTINGS = [(rows, alpha, honest, aggregate) for rows in (600, 1200, 2400) for alpha in (0.05, 0.2)
            for honest, aggregate in ((False, False), (True, False), (True, True))]  # fmt: skip

data_path, trials, draws = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lams = [float(x) for x in sys.argv[4].split(",")]
limit = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "-" else None
if len(sys.argv) > 6:
    SETTINGS = [(int(r), float(a), h == "1", g == "1") for r, a, h, g in (x.split(",") for x in sys.argv[6].split(";"))]
for trial, split, fits in dev_trials(data_path, trials, draws, lams, limit):
    order = fits.order
    hold = fits.logged.subset(order)
    held = [learner.nuisance_.held_out(fits.logged.subset(f)).scores for learner, f in zip(fits.learners, fits.folds)]
    oof = held[0].concat(*held[1:])
    groups = prompt_groups(hold.X)
    test = split.full_test
    rows = np.arange(test.n_samples)

    def utility(actions, lam, test=test, rows=rows):
        return 100 * float((test.quality[rows, actions] - lam * test.cost[rows, actions]).mean())

    single = reference_actions("single-best", split.full_train, test, lams)
    for rows_per_region, alpha, honest, aggregate in SETTINGS:
        regions = fit_regions(hold.X, groups, rows_per_region=rows_per_region, min_prompts_per_region=1, seed=trial)
        for j, lam in enumerate(lams):
            b = oof.best_constant(lam)
            folds = [np.arange(len(order))[np.isin(order, f)] for f in fits.folds] if honest else None
            choice = choose_regions(
                oof.quality,
                oof.cost,
                hold.action,
                regions,
                groups,
                b,
                lam,
                propensity=hold.propensity,
                alpha=alpha,
                folds=folds,
                aggregate=aggregate,
            )
            chosen = choice.models[nearest_centroid(test.X, regions.centroids)]
            print(json.dumps({
                "data": data_path, "K": draws, "trial": trial, "rows_per_region": rows_per_region, "alpha": alpha, "honest": honest, "aggregate": aggregate, "lam": lam,
                "regions": regions.n_regions, "adopted": choice.n_adopted, "adopted_share": choice.adopted_share,
                "regional": utility(chosen, lam), "logged_constant": utility(np.full(len(rows), b), lam),
                "single_best": utility(single[j], lam),
            }), flush=True)  # fmt: skip
