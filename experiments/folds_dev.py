"""Dev study (the test split is never read): past how many logged rows may retrain cross-fit with two
folds instead of five without publishing worse routers, and does training its networks' products in
bfloat16 change what it publishes? Per trial (`evaluate_on="dev"`: a held-out slice of
the train prompts, never logged), K logged draws per training prompt, what retrain publishes from the
trial's logs (`served_actions`, its own code) with each number of folds; scored on the dev prompts with the
true outcomes beside the single best model. One JSON line per trial, folds and lambda.

    python experiments/folds_dev.py DATA TRIALS K LAMBDAS FOLDS [LIMIT] > out.jsonl
    python experiments/folds_dev.py --summary out.jsonl ...

TRIALS: a number (trials 0..TRIALS-1) or a comma list of trials (e.g. 1,2); FOLDS: a comma list, e.g. 5,2
(every trial's logs are the same for each); ``5@100`` is five folds with retrain's seed 100 above the trial's
(the same logs fitted again: how far retrain's own seed moves what it publishes); a setting may end in
``/float32`` or ``/bfloat16``, the precision of its mini-batch fits (``retrain --precision``; without it,
retrain's default: ``auto``), e.g. ``2/float32,2``.
"""

import json
import sys
import time
from collections import defaultdict

import numpy as np
from dev_trials import dev_splits, utility_x100

from regret_gateway.evaluation.offline import reference_actions, served_actions


def run(data_path: str, trials: list[int], draws: int, lams: list[float], folds: list[str], limit: int | None) -> None:
    for trial, split in dev_splits(data_path, max(trials) + 1, draws, lams, limit):
        if trial not in trials:
            continue
        test = split.full_test
        single = reference_actions("single-best", split.full_train, test, lams)
        first = None
        for setting in folds:
            k, offset = (int(v) for v in (setting.partition("/")[0] + "@0").split("@")[:2])
            precision = setting.partition("/")[2] or "auto"
            t0 = time.perf_counter()
            actions, served = served_actions(split.logs, test.X, np.asarray(lams), folds=k, seed=trial + offset,
                                             precision=precision)  # fmt: skip
            seconds = time.perf_counter() - t0
            first = actions if first is None else first
            for j, lam in enumerate(lams):
                print(json.dumps({"data": data_path, "K": draws, "rows": split.logs.n_samples, "trial": trial, "folds": setting,
                                  "lam": lam, "served": served[j].label, "utility": utility_x100(test, actions[j], lam),
                                  "single_best": utility_x100(test, single[j], lam),
                                  "same_as_first": float(np.mean(actions[j] == first[j])), "first": folds[0],
                                  "seconds": seconds}),
                      flush=True)  # fmt: skip


def same(rows: list[dict], label) -> str:
    """The share of dev prompts routed as the first setting routed them, where the rows' run had it first."""
    if any(str(r.get("first", label)) != str(label) for r in rows):
        return "-"  # another run: its choices were not compared with the first setting's
    return f"{np.mean([r['same_as_first'] for r in rows]):.1%}"


def summary(paths: list[str]) -> None:
    """Markdown: per data, K and folds, mean over lambda and trials of served - single best, and paired to the
    first folds setting."""
    rows = [json.loads(line) for p in paths for line in open(p) if line.strip()]
    by = defaultdict(lambda: defaultdict(list))  # (data, K) -> folds -> [(trial, lam, utility, single, same, s)]
    for r in rows:
        by[(r["data"].rstrip("/").split("/")[-1], r["K"], r["rows"])][r["folds"]].append(r)
    print("| data | K | logged rows | folds | trials | served - single best | paired to the first | same choices | seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (data, K, n), per in by.items():
        label = next(iter(per))
        ref = {(r["trial"], r["lam"]): r["utility"] for r in per[label]}
        for k, rs in per.items():
            trials = sorted({r["trial"] for r in rs})
            gap = [np.mean([r["utility"] - r["single_best"] for r in rs if r["trial"] == t]) for t in trials]
            paired = [np.mean([r["utility"] - ref[(t, r["lam"])] for r in rs if r["trial"] == t]) for t in trials]
            secs = np.mean([r["seconds"] for r in rs])
            print(
                f"| {data} | {K} | {n} | {k} | {len(trials)} | {np.mean(gap):+.2f} ({', '.join(f'{g:+.2f}' for g in gap)}) | "
                f"{np.mean(paired):+.2f} ({', '.join(f'{g:+.2f}' for g in paired)}) | "
                f"{same(rs, label)} | {secs:.0f} |"
            )


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2:])
    else:
        a = sys.argv[1:]
        trials = [int(t) for t in a[1].split(",")] if "," in a[1] else list(range(int(a[1])))
        run(a[0], trials, int(a[2]), [float(x) for x in a[3].split(",")], a[4].split(","),
            int(a[5]) if len(a) > 5 else None)  # fmt: skip
