"""Dev study (the test split is never read): does the regions' minimum effective sample size
(`policy.regions.MIN_ESS`: a region's challenger and baseline each logged there with an ESS of at least
100) change what retrain publishes from the offline curve's logs? Per trial, retrain's cross-fitted fits
once (`dev_trials`), then its gate (`policy.gate.evaluate`) twice: with the rule and without it
(`min_ess=0`); the published choices scored on the dev prompts with the true outcomes. One JSON line per
trial and lambda.

    python experiments/region_ess_dev.py DATA TRIALS K LAMBDAS [LIMIT] > out.jsonl
    python experiments/region_ess_dev.py --summary out.jsonl ...
"""

import functools
import json
import sys
from collections import defaultdict

import numpy as np
from dev_trials import dev_trials, utility_x100

import regret_gateway.retrain.gate as gate
from regret_gateway.config import TierSpec
from regret_gateway.evaluation.offline import reference_actions
from regret_gateway.policy.regions import MIN_ESS, choose_regions

ARMS = {"min_ess": MIN_ESS, "none": 0.0}


def run(data_path: str, trials: int, draws: int, lams: list[float], limit: int | None) -> None:
    tiers = [(f"lambda={lam:g}", TierSpec(lam=lam)) for lam in lams]
    for trial, split, fits in dev_trials(data_path, trials, draws, lams, limit):
        test = split.full_test
        single = reference_actions("single-best", split.full_train, test, lams)
        chosen = {}
        for arm, min_ess in ARMS.items():
            gate.choose_regions = functools.partial(choose_regions, min_ess=min_ess)  # type: ignore[assignment]
            rows, policy = gate.evaluate(fits, tiers, seed=trial)
            chosen[arm] = (rows, [policy.choose(test.X, lam) for lam in lams])
        for j, lam in enumerate(lams):
            out = {"data": data_path, "K": draws, "rows": split.logs.n_samples, "trial": trial, "lam": lam,
                   "single_best": utility_x100(test, single[j], lam),
                   "same": float(np.mean(chosen["min_ess"][1][j] == chosen["none"][1][j]))}  # fmt: skip
            for arm, (rows, actions) in chosen.items():
                out[arm] = {"served": rows[j].served, "regions_adopted": rows[j].regions_adopted,
                            "utility": utility_x100(test, actions[j], lam)}  # fmt: skip
            print(json.dumps(out), flush=True)


def summary(paths: list[str]) -> None:
    rows = [json.loads(line) for p in paths for line in open(p) if line.strip()]
    by = defaultdict(list)
    for r in rows:
        by[(r["data"], r["K"])].append(r)
    print(
        "| data | K | trials | with min ESS - single best | without - single best | with - without (per trial) | tier-trials that differ | regions adopted (with / without) |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---|")
    for (data, k), rs in by.items():
        trials = sorted({r["trial"] for r in rs})
        per = {t: [r for r in rs if r["trial"] == t] for t in trials}
        w = [np.mean([r["min_ess"]["utility"] - r["single_best"] for r in per[t]]) for t in trials]
        wo = [np.mean([r["none"]["utility"] - r["single_best"] for r in per[t]]) for t in trials]
        diff = ", ".join(f"{a - b:+.2f}" for a, b in zip(w, wo))
        differ = sum(r["same"] < 1 for r in rs)
        adopted = f"{sum(r['min_ess']['regions_adopted'] for r in rs)} / {sum(r['none']['regions_adopted'] for r in rs)}"
        print(f"| {data} | {k} | {len(trials)} | {np.mean(w):+.2f} | {np.mean(wo):+.2f} | {np.mean(w) - np.mean(wo):+.2f} ({diff}) | "
              f"{differ} of {len(rs)} | {adopted} |")  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2:])
    else:
        a = sys.argv[1:]
        run(a[0], int(a[1]), int(a[2]), [float(v) for v in a[3].split(",")], int(a[4]) if len(a) > 4 else None)
