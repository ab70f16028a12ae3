"""How well the users' overlap measures a judge's error when the truth is graded (LLMRouter's scores) and
the judge reports the truth or, at a flip rate e, its opposite (1 - u: the demo's mock judge).

Per draw: ``judged`` requests spread over the models by the world's prompts, each judged; ``pairs`` of
them also scored by a user (the truth). Two ways to read the pairs: the calibration line over every grade
(``judge_calibration``) and the rule it replaced (the users' grades cut at 0.5: false pass = the judge's
mean where the user scored < 0.5, false fail = 1 - its mean where >= 0.5). Reported per rule: the pooled
error estimate's mean absolute distance to e (both rates), and the corrected judge scores' mean minus the
truth's mean, per model, mean absolute over models (what retrain learns a model is worth).

    python experiments/judge_graded.py DATA FLIPS PAIRS DRAWS > table.md

DATA ``graded``: a synthetic world of 5,000 prompts and 9 models whose mean grades are spread over 0.3-0.8,
every grade drawn from a Beta of that mean (concentration 2): graded through and through.
"""

import sys

import numpy as np

from regret_gateway.data import corrected_score
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.judge.calibration import _error


def cut(user: np.ndarray, judge: np.ndarray) -> tuple[float, float]:
    return float(judge[user < 0.5].mean()), float(1 - judge[user >= 0.5].mean())


def line(user: np.ndarray, judge: np.ndarray) -> tuple[float, float]:
    e = _error("*", user, judge)
    assert e.false_pass is not None and e.false_fail is not None
    return e.false_pass, e.false_fail


if sys.argv[1] == "graded":
    means = np.linspace(0.3, 0.8, 9)
    Q = np.random.default_rng(0).beta(2 * means, 2 * (1 - means), size=(5000, 9))
else:
    Q = load_benchmark(sys.argv[1], seed=0).quality
flips = [float(x) for x in sys.argv[2].split(",")]
pair_counts = [int(x) for x in sys.argv[3].split(",")]
draws = int(sys.argv[4])
n_prompts, T = Q.shape
graded = float(np.mean((Q > 0) & (Q < 1)))
print(f"{sys.argv[1]}: {n_prompts} prompts, {T} models, {100 * graded:.0f}% of scores strictly between 0 and 1\n")
print(
    "| flip rate | user pairs | rule | error estimate: mean abs distance to e (pts) | corrected mean - truth, mean abs over models (pts) |"
)
print("|---:|---:|---|---:|---:|")
for e in flips:
    for pairs in pair_counts:
        out: dict[str, tuple[list[float], list[float]]] = {"calibration line": ([], []), "cut at 0.5": ([], [])}
        for d in range(draws):
            rng = np.random.default_rng(d)
            judged = 20 * pairs
            rows, models = rng.integers(n_prompts, size=judged), rng.integers(T, size=judged)
            truth = Q[rows, models]
            score = np.where(rng.random(judged) < e, 1 - truth, truth)
            user = np.arange(judged) < pairs
            for rule, f in (("calibration line", line), ("cut at 0.5", cut)):
                fp, ff = f(truth[user], score[user])
                out[rule][0].append(100 * (abs(fp - e) + abs(ff - e)) / 2)
                corrected = corrected_score(score, fp, ff)
                gaps = [corrected[models == t].mean() - truth[models == t].mean() for t in range(T) if (models == t).any()]
                out[rule][1].append(100 * float(np.mean(np.abs(gaps))))
        for rule, (err, gap) in out.items():
            print(f"| {e:.2f} | {pairs} | {rule} | {np.mean(err):.1f} | {np.mean(gap):.1f} |")
