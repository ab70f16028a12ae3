"""The judge experiment's plot: the router's own (greedy) utility per round and tier, direct feedback vs
the LLM judge, from the demo runs' closed_loop.json.

    python experiments/judge_plot.py OUT.png TITLE=RUN_DIR[,RUN_DIR...] ...
    (each RUN_DIR holds a closed_loop.json; the first of a group is the direct run, its best-single line is drawn)
"""

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

out, groups = sys.argv[1], [arg.split("=", 1) for arg in sys.argv[2:]]
tiers = ("premium", "standard", "economy")
fig, axes = plt.subplots(len(groups), 3, figsize=(12, 3.2 * len(groups)), squeeze=False)
for row, (title, dirs) in enumerate(groups):
    for k, run in enumerate(dirs.split(",")):
        doc = json.loads((Path(run) / "closed_loop.json").read_text())
        label = Path(run).name
        for col, tier in enumerate(tiers):
            rows = [r for r in doc["rounds"] if r["tier"] == tier]
            ax = axes[row][col]
            ax.plot([r["round"] for r in rows], [r["utility"]["gateway-greedy"] for r in rows], marker="o", label=label)
            if k == 0:
                ax.plot([r["round"] for r in rows], [r["utility"]["best-single"] for r in rows], "k--", label="best single model")
            ax.set_title(f"{title}: {tier} (λ={rows[0]['lam']:g})", fontsize=9)
            ax.set_xlabel("round")
    axes[row][0].set_ylabel("router's own choices, utility x100")
    axes[row][0].legend(fontsize=7)
fig.tight_layout()
fig.savefig(out, dpi=110)
print("wrote", out)
