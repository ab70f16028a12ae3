"""Dev study (the test split is never read): what pricing each request by its prompt's size is worth before
any gate. Per trial (`evaluate_on="dev"`), K logged draws per training prompt; from the logs alone (no
fitting): each model's quality and cost by inverse propensity weighting (exact logged propensities), and
its cost line in the prompt's tokens by least squares on its logged answers, where the line explains its
logged costs (:func:`regret_gateway.policy.priced.priced_lines`, the priced router's rule).
Two policies, scored on the dev prompts with the true outcomes against the single best model (full
feedback): the logs' constant (the best mean utility) and the priced constant (per request, the best
quality minus lambda times the model's line at the prompt's size: the priced router's rule).

    python experiments/priced_potential.py DATA K LAMBDAS [LIMIT] [TRIALS]
"""

import sys

import numpy as np

from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.evaluation.offline import OfflineConfig, make_trial, reference_actions
from regret_gateway.policy.priced import priced_lines
from regret_gateway.tokens import count_tokens

path, draws = sys.argv[1], int(sys.argv[2])
lams = [float(x) for x in sys.argv[3].split(",")]
limit = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] != "-" else None
trials = int(sys.argv[5]) if len(sys.argv) > 5 else 5
bench = load_benchmark(path, limit=limit, seed=0)
tokens = count_tokens(bench.prompts)
X = np.zeros((bench.n_samples, 2), dtype=np.float32)
X[:, 0] = np.arange(bench.n_samples)  # each row's prompt index rides in the features (nothing here reads them)
full = bench.full_feedback(X)
out: dict[float, list[tuple[float, float]]] = {lam: [] for lam in lams}
for trial in range(trials):
    cfg = OfflineConfig(lambdas=tuple(lams), methods=("r-and-c",), propensity="logged", evaluate_on="dev", log_draws=draws)
    split = make_trial(bench, full, cfg, trial)
    logs, test = split.logs, split.full_test
    prompt, test_prompt = logs.X[:, 0].astype(int), test.X[:, 0].astype(int)
    a, p, n, T = logs.action, logs.propensity, logs.n_samples, logs.n_models
    quality = np.array([(logs.quality[a == t] / p[a == t]).sum() / n for t in range(T)])
    cost = np.array([(logs.cost[a == t] / p[a == t]).sum() / n for t in range(T)])
    lines = priced_lines(tokens[prompt], a, logs.cost, T)
    priced_cost = np.stack([np.full(test.n_samples, cost[t]) if line is None else line.cost(tokens[test_prompt])
                            for t, line in enumerate(lines)], axis=1)  # fmt: skip
    single = reference_actions("single-best", split.full_train, test, lams)
    rows = np.arange(test.n_samples)
    for j, lam in enumerate(lams):
        U = 100 * (test.quality - lam * test.cost)
        best = U[rows, single[j]].mean()
        constant = U[rows, int(np.argmax(quality - lam * cost))].mean()
        priced = U[rows, np.argmax(quality[None, :] - lam * priced_cost, axis=1)].mean()
        out[lam].append((constant - best, priced - best))
print(f"{path}, K = {draws}, {trials} trials: dev utility x100 minus the single best model, mean (per trial)\n")
print("| lambda | logs' constant | priced constant |\n|---:|---|---|")
for lam, v in out.items():
    d = np.array(v)
    cells = [f"{d[:, k].mean():+.2f} ({', '.join(f'{x:+.1f}' for x in d[:, k])})" for k in (0, 1)]
    print(f"| {lam:g} | {cells[0]} | {cells[1]} |")
