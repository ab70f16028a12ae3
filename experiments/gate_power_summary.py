"""The table of gate_power_dev.py runs: per run, what retrain serves minus the single best model (mean over
lambda and trials, then per trial), the keys departing per tier, the ceiling and the per-key yardsticks.

    python experiments/gate_power_summary.py LABEL=RUN.jsonl [LABEL=RUN.jsonl ...]
"""

import json
import sys

import numpy as np

COLUMNS = ("ceiling", "keys_full_info", "keys_dr_shrunk_argmax")


def per_trial(rows: list[dict], key: str) -> np.ndarray:
    trials = sorted({r["trial"] for r in rows})
    return np.array([np.mean([r["true_gain_vs_single"][key] for r in rows if r["trial"] == t]) for t in trials])


print(
    "| run | served (per trial) | regions departing per tier | ceiling | each key's best, full information | each key's best by the logs' shrunk DR means |"
)
print("|---|---|---:|---:|---:|---:|")
for spec in sys.argv[1:]:
    label, path = spec.rsplit("=", 1)
    rows = [json.loads(line) for line in open(path)]
    served = per_trial(rows, "served")
    cells = [
        f"**{served.mean():+.2f}** ({', '.join(f'{v:+.2f}' for v in served)})",
        f"{np.mean([r['regions_adopted'] for r in rows]):.1f}",
    ]
    for key in COLUMNS:
        cells.append(f"{per_trial(rows, key).mean():+.2f}" if key in rows[0]["true_gain_vs_single"] else "n/a")
    print(f"| {label} | " + " | ".join(cells) + " |")
