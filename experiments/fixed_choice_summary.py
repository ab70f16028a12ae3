"""Summary of fixed_choice_dev.py output: each estimator's mean dev utility minus the single best model's."""

import json
import sys

import numpy as np

rows = [json.loads(l) for l in open(sys.argv[1])]
for d in (r for r in rows if r.get("diagnostic")):
    print(
        "trial",
        d["trial"],
        "RMSE over models of the mean:",
        {k: round(v, 5) for k, v in d.items() if k not in ("trial", "diagnostic")},
    )
rows = [r for r in rows if not r.get("diagnostic")]
names = [k for k in rows[0] if k not in ("trial", "lam", "single")]
print("trials", sorted({r["trial"] for r in rows}))
for n in names:
    per_trial = [np.mean([r[n] - r["single"] for r in rows if r["trial"] == t]) for t in sorted({r["trial"] for r in rows})]
    print(
        f"{n:22s} mean-single {np.mean(per_trial):+.2f}  per trial {' '.join(f'{x:+.2f}' for x in per_trial)}  same-as-single {np.mean([abs(r[n] - r['single']) < 1e-9 for r in rows]):.2f}"
    )
