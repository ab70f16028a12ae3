"""The closed loop's last round, run by run (`demo` output folders): per tier, the greedy choices on the
held-out prompts against the best single model's there, and what the teams got against the best single
model and LiteLLM's adaptive router on the round's traffic; then per run the mean over tiers.

    python experiments/heldout_summary.py runs/ts2-llmrouter-s0 runs/ts2-llmrouter-s1 ...
"""

import json
import sys
from pathlib import Path

import numpy as np


def main(folders: list[str]) -> None:
    print("| run | tier | λ | held-out greedy | held-out best-single | held-out greedy - best-single | held-out full-info "
          "| teams got | best-single (traffic) | litellm-adaptive (traffic) |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    means = []
    for folder in folders:
        doc = json.loads((Path(folder) / "closed_loop.json").read_text())
        last = [r for r in doc["rounds"] if r["round"] == max(x["round"] for x in doc["rounds"])]
        for r in last:
            u = r["utility"]
            print(f"| {Path(folder).name} | {r['tier']} | {r['lam']:g} | {u['held-out greedy']:.1f} | {u['held-out best-single']:.1f} | "
                  f"{u['held-out greedy'] - u['held-out best-single']:+.1f} | {u['held-out full-info']:.1f} | {u['gateway']:.1f} | "
                  f"{u['best-single']:.1f} | {u['litellm-adaptive']:.1f} |")  # fmt: skip
        gap = [r["utility"]["held-out greedy"] - r["utility"]["held-out best-single"] for r in last]
        teams = [r["utility"]["gateway"] - max(r["utility"]["best-single"], r["utility"]["litellm-adaptive"]) for r in last]
        means.append((Path(folder).name, float(np.mean(gap)), sum(g >= 0 for g in gap), float(np.mean(teams)), len(last)))
    print()
    print(
        "| run | held-out greedy - best single, mean over tiers | tiers at least the best single model | teams got - max(best single, LiteLLM adaptive), mean |"
    )
    print("|---|---:|---:|---:|")
    for name, gap, at_least, teams, n in means:
        print(f"| {name} | {gap:+.2f} | {at_least} of {n} | {teams:+.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
