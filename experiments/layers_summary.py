"""Routing signal against encoder depth (or any one embedder setting): reads the `bench offline --methods
full-info-regression --layers N` runs of each dataset (OUT folders named RUNS/layers-<dataset>-L<N>, N = 6
for the full model) and prints, per dataset and depth, the mean utility over lambda (mean and std over
trials), its paired difference to the single best model and to the largest setting's run (same seeds, same
splits), and the trials it is above. An optional fourth argument names the folders of another setting,
e.g. `maxlen-{dataset}-T{n}` for `--max-length N` runs.

    python experiments/layers_summary.py runs llmrouter,routerbench,mmlupro 2,3,6
    python experiments/layers_summary.py runs llmrouter,routerbench,mmlupro 64,128,256 "maxlen-{dataset}-T{n}"
"""

import json
import sys
from pathlib import Path

import numpy as np

root, datasets, depths = Path(sys.argv[1]), sys.argv[2].split(","), [int(n) for n in sys.argv[3].split(",")]
folder = sys.argv[4] if len(sys.argv) > 4 else "layers-{dataset}-L{n}"
full = max(depths)
print(
    "| dataset | layers | full-info-regression | - single best | trials above single best | - full depth | trials above full depth |"
)
print("|---|---:|---:|---:|---:|---:|---:|")
for name in datasets:
    runs = {n: json.loads((root / folder.format(dataset=name, n=n) / "results.json").read_text()) for n in depths}
    per_trial = {n: np.mean(r["raw"]["full-info-regression"]["utility"], axis=1) for n, r in runs.items()}
    single = np.mean(runs[full]["raw"]["single-best"]["utility"], axis=1)
    for n in depths:
        # the single best model is chosen on the same prompts at every depth (it reads no embedding)
        assert np.allclose(np.mean(runs[n]["raw"]["single-best"]["utility"], axis=1), single)
        u = per_trial[n]
        vs_single, vs_full = u - single, u - per_trial[full]
        tail = "- | -" if n == full else f"{vs_full.mean():+.2f}±{vs_full.std():.2f} | {int((vs_full > 0).sum())}/{len(u)}"
        print(
            f"| {name} | {n} | {u.mean():.2f}±{u.std():.2f} | {vs_single.mean():+.2f}±{vs_single.std():.2f} | "
            f"{int((vs_single > 0).sum())}/{len(u)} | {tail} |"
        )
