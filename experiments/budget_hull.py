"""How close can a budgeted team's ladder, built from logged rows, come to the best two-model mix chosen in
hindsight? (numpy, seconds; no router, no replay)

The budget replays' reference `two-model mix` (bench/demo/budget_days.py) picks, with every model's true
outcome on the day's requests, the two models whose random mix spends the budget for the most quality: the
upper concave hull of the models' true (mean cost, mean quality) at the budget. A router that knew those
means would be that mix (the frontier ladder, steered onto the budget). Here each model's mean quality is
instead estimated from n logged rows (n prompts drawn at random, the model's recorded outcome on each: a
uniform cold start's rows), its mean cost taken as known (spend is observed, and the controller lands the
spend on the budget whatever the estimates say); the upper hull of the estimates at the budget gives two
models, mixed to spend the budget exactly, and that mix is scored on the true means. The gap to the
hindsight mix is what the logs' estimates cost, per n; the prompts are the file's (a seeded subset with
LIMIT), the budget per request the cheapest model's mean cost plus LEVEL of the way to the best model's.

    python experiments/budget_hull.py DATA LIMIT LEVELS ROWS TRIALS
    e.g. python experiments/budget_hull.py ../shared/data/mmlupro 5000 0.25,0.5,0.75 100,190,400,1000,3000 500
"""

import sys

import numpy as np

from regret_gateway.bench.demo.budget_days import best_two_model_mix
from regret_gateway.evaluation.loaders import load_benchmark


def mix_quality(quality: np.ndarray, a: int, b: int, s: float) -> float:
    return float((1 - s) * quality[a] + s * quality[b])


def main(path: str, limit: int | None, levels: list[float], rows: list[int], trials: int) -> None:
    bench = load_benchmark(path, limit=limit, seed=0)
    Q, C = bench.quality, bench.cost  # (prompts, models): every model's recorded outcome on every prompt
    q_true, c_true = Q.mean(0), C.mean(0)
    cheapest, top = int(np.argmin(c_true)), int(np.argmax(q_true))
    print(f"{path}: {bench.n_samples} prompts, {len(bench.model_names)} models; {trials} trials per row count")
    print("| budget level | hindsight two-model mix | logged rows a model | ladder from the logs - hindsight (x100) | "
          "worst trial | P(within 0.5) | hull pair right |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for level in levels:
        budget = c_true[cheapest] + level * (c_true[top] - c_true[cheapest])
        a, b, s = best_two_model_mix(c_true, q_true, budget)
        truth = mix_quality(q_true, a, b, s)
        label = f"{bench.model_names[a]} / {bench.model_names[b]} ({100 * truth:.2f})"
        for n in rows:
            gaps, right = [], 0
            for _ in range(trials):
                logged = rng.integers(len(Q), size=(n, Q.shape[1]))  # n prompts a model, drawn independently
                q_hat = Q[logged, np.arange(Q.shape[1])].mean(0)
                ea, eb, _ = best_two_model_mix(c_true, q_hat, budget)
                s_true = 0.0 if ea == eb else (budget - c_true[ea]) / (c_true[eb] - c_true[ea])  # spends the budget
                gaps.append(100 * (mix_quality(q_true, ea, eb, s_true) - truth))
                right += {ea, eb} == {a, b}
            g = np.array(gaps)
            print(f"| {level} | {label} | {n} | {g.mean():+.2f} | {g.min():+.2f} | {(g >= -0.5).mean():.2f} | "
                  f"{right / trials:.2f} |")  # fmt: skip


if __name__ == "__main__":
    lim = int(sys.argv[2]) or None
    main(sys.argv[1], lim, [float(v) for v in sys.argv[3].split(",")], [int(v) for v in sys.argv[4].split(",")],
         int(sys.argv[5]))  # fmt: skip
