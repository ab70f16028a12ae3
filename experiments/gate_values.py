"""What retrain's gate saw in one dev trial with the size feature: every candidate's DR value and interval
per tier, what it served, and the served policy's and the single best model's true utility on the dev
prompts (the test split is never read).

    python experiments/gate_values.py DATA TRIAL K LAMBDAS
"""

import sys

import numpy as np

from regret_gateway.config import TierSpec
from regret_gateway.context import SizeFeature
from regret_gateway.encoders.embedder import Embedder, default_cache_dir
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial, reference_actions
from regret_gateway.retrain.fits import out_of_fold_fits
from regret_gateway.retrain.gate import evaluate
from regret_gateway.tokens import count_tokens

path, trial, draws = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lams = [float(x) for x in sys.argv[4].split(",")]
bench = load_benchmark(path, seed=0)
X = Embedder(kind="transformer", progress=False, cache_dir=default_cache_dir()).encode_unique(
    bench.prompts, datasets=bench.groups.tolist()
)
size = SizeFeature()
cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on="dev", log_draws=draws)
split = make_trial(bench, bench.full_feedback(size.append(X, count_tokens(bench.prompts))), cfg, trial)
fits = out_of_fold_fits(split.logs, lams, seed=trial)
rows, policy = evaluate(fits, [(f"lambda={lam:g}", TierSpec(lam=lam)) for lam in lams], seed=trial, size=size)
test = split.full_test
single = reference_actions("single-best", split.full_train, test, lams)
idx = np.arange(test.n_samples)
for j, (row, lam) in enumerate(zip(rows, lams)):
    U = 100 * (test.quality - lam * test.cost)
    values = ", ".join(f"{k} {100 * v.dr:.1f} [{100 * v.dr_ci[0]:.1f}, {100 * v.dr_ci[1]:.1f}]" for k, v in row.values.items())
    print(f"lambda {lam:g}: served {row.served}; true dev utility {U[idx, policy.choose(test.X, lam)].mean():.2f}, "
          f"single best {U[idx, single[j]].mean():.2f}\n  estimated: {values}")  # fmt: skip
