"""The learning curve from `bench offline --log-draws K` runs: per K, every method's test utility (x100, mean
over lambda) per trial, paired with the single best model (how many trials above it, how many within 0.5
of it: the never-worse bar), the best constant the logs choose and the full-information ceiling,
beside the oracle; one plot of mean utility against logged rows.

    python experiments/learning_curve.py OUT.png RUN_DIR [RUN_DIR ...] > table.md

Each RUN_DIR holds a `results.json` of `regret-gateway bench offline --log-draws K` (same data, seeds
and lambdas for every K, so trial t of one K and trial t of another share the split).
"""

import json
import sys
from pathlib import Path

import numpy as np

CEILING = ("full-info-regression", "full-info-regret")
REFERENCE_LINES = ("single-best", *CEILING)


def load(folder: str) -> dict:
    doc = json.loads((Path(folder) / "results.json").read_text())
    per_trial = {name: np.asarray(raw["utility"]).mean(1) for name, raw in doc["raw"].items()}
    return {"K": doc["dataset"]["log_draws"], "rows": doc["dataset"]["logged_rows"], "name": doc["dataset"].get("source", ""),
            "per_trial": per_trial}  # fmt: skip


def main() -> None:
    out, folders = sys.argv[1], sys.argv[2:]
    runs = sorted((load(f) for f in folders), key=lambda r: r["K"])
    methods = [m for m in runs[0]["per_trial"] if m != "oracle"]
    print("| K | logged rows | trials | " + " | ".join(methods) + " | oracle | served - single-best (trials above; within 0.5) | per trial"
          " | served - logged-constant (trials above) | share of the ceiling's gain |")  # fmt: skip
    print("|---:|---:|---:|" + "---:|" * len(methods) + "---:|---:|---|---:|---:|")
    for r in runs:
        u = r["per_trial"]
        n = len(u["single-best"])
        cells = [f"{u[m].mean():.2f}±{u[m].std():.2f}" for m in methods]
        d_single = u["served"] - u["single-best"]
        d_const = u["served"] - u["logged-constant"]
        ceiling = next((c for c in CEILING if c in u), None)
        share = "n/a"
        if ceiling is not None:
            gap = u[ceiling] - u["single-best"]
            share = (
                f"{np.mean(d_single) / np.mean(gap):.2f} (ceiling +{np.mean(gap):.2f})"
                if np.mean(gap) > 0
                else "ceiling <= single-best"
            )
        oracle = f"{u['oracle'].mean():.2f}" if "oracle" in u else "-"
        trials = ", ".join(f"{d:+.2f}" for d in d_single)
        print(f"| {r['K']} | {r['rows']} | {n} | " + " | ".join(cells) + f" | {oracle}"
              + f" | {d_single.mean():+.2f} ({int((d_single > 0).sum())}/{n}; {int((d_single >= -0.5).sum())}/{n}) | {trials}"
              + f" | {d_const.mean():+.2f} ({int((d_const > 0).sum())}/{n}) | {share} |")  # fmt: skip

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    rows = [r["rows"] for r in runs]
    for k, m in enumerate(methods):
        y = [r["per_trial"][m].mean() for r in runs]
        if m in REFERENCE_LINES:
            black = m == "single-best"
            ax.plot(rows, y, linestyle="--", color="black" if black else "grey", label=m, zorder=3 if black else 2)
        else:
            ax.plot(rows, y, marker="o", color=f"C{k}", linewidth=2.5 if m == "served" else 1.2, label=m, zorder=2,
                    linestyle=":" if m == "logged-constant" else "-")  # fmt: skip
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(rows, [f"{n:,}\nK={r['K']}" for n, r in zip(rows, runs)])
    ax.set_xlabel("logged rows (training prompts x K draws)")
    ax.set_ylabel("test utility x100, mean over lambda")
    ax.set_title("learning curve: what the logs buy on prompts never logged")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
