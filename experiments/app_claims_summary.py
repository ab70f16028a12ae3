"""The closed loop with chat traffic, run by run (`demo` output folders): per round, the mean over tiers on
the held-out prompts of the router's greedy choices against the best single model, each app's best model
and the oracle, and the share of the per-app gain reached; then every gain a retrain published beside its
held-out truth, and how many intervals held it; then each tier's greedy choices against its best single model
after the last round.

    python experiments/app_claims_summary.py runs/app-llmrouter-s0 runs/app-mmlupro-s0 ...
"""

import json
import sys
from pathlib import Path

import numpy as np

TIERS = ("premium", "standard", "economy")


def main(folders: list[str]) -> None:
    print(
        "| run | round | held-out greedy | best single | each app's best | oracle | greedy - best single | share of the per-app gain |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    claims = []
    for folder in folders:
        doc = json.loads((Path(folder) / "closed_loop.json").read_text())
        for rnd in sorted({r["round"] for r in doc["rounds"]}):
            rows = [r["utility"] for r in doc["rounds"] if r["round"] == rnd and "held-out greedy" in r["utility"]]
            if not rows:
                continue
            m = {k: float(np.mean([u[k] for u in rows])) for k in ("held-out greedy", "held-out best-single",
                                                                   "held-out per-app best", "held-out oracle")}  # fmt: skip
            lift, app = m["held-out greedy"] - m["held-out best-single"], m["held-out per-app best"] - m["held-out best-single"]
            share = f"{lift / app:.0%}" if app > 0 else "-"
            print(f"| {Path(folder).name} | {rnd} | {m['held-out greedy']:.1f} | {m['held-out best-single']:.1f} | "
                  f"{m['held-out per-app best']:.1f} | {m['held-out oracle']:.1f} | {lift:+.1f} | {share} |")  # fmt: skip
        claims += [(Path(folder).name, c) for c in doc.get("claims", [])]
    print()
    print(
        "| run | after round | tier | published | over | claimed (x100) | 95% interval | held-out truth | traffic truth | holds |"
    )
    print("|---|---:|---|---|---|---:|---|---:|---:|---|")
    for name, c in claims:
        pool = f"{c['traffic_truth']:+.1f}" if c.get("traffic_truth") is not None else "-"
        print(f"| {name} | {c['round']} | {c['tier']} | {c['published']} | {c['incumbent']} | {c['claimed']:+.1f} | "
              f"[{c['ci'][0]:+.1f}, {c['ci'][1]:+.1f}] | {c['held_out_truth']:+.1f} | {pool} | {'yes' if c['holds'] else 'NO'} |")  # fmt: skip
    held = sum(c["holds"] for _, c in claims)
    print(f"\n{held} of {len(claims)} published claims' intervals held their held-out truth")
    print("\nAfter the last round, per tier, on its never-sent prompts: greedy - best single (per-app best - best single);")
    print("then the same greedy choices on the last round's traffic (the prompts the logs were drawn from)\n")
    print("| run | " + " | ".join(TIERS) + " | tiers below their best single by more than 0.5 | mean | on the traffic: "
          + " | ".join(TIERS) + " |")  # fmt: skip
    print("|---|" + "---:|" * (len(TIERS) * 2 + 2))
    for folder in folders:
        doc = json.loads((Path(folder) / "closed_loop.json").read_text())
        last = max(r["round"] for r in doc["rounds"])
        u = {r["tier"]: r["utility"] for r in doc["rounds"] if r["round"] == last}
        if not all("held-out greedy" in u.get(t, {}) for t in TIERS):
            continue
        gaps = {t: u[t]["held-out greedy"] - u[t]["held-out best-single"] for t in TIERS}
        cells = [f"{gaps[t]:+.1f} ({u[t]['held-out per-app best'] - u[t]['held-out best-single']:+.1f})" for t in TIERS]
        traffic = [f"{u[t]['gateway-greedy'] - u[t]['best-single']:+.1f}" for t in TIERS]
        print(f"| {Path(folder).name} | " + " | ".join(cells) + f" | {sum(g < -0.5 for g in gaps.values())} | "
              f"{np.mean(list(gaps.values())):+.2f} | " + " | ".join(traffic) + " |")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
