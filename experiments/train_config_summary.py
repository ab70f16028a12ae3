"""Summary of train_config_dev.py output: per log size and training config, the mean fit time and each
candidate's mean dev utility (x100, mean over the tier lambdas) minus the full-batch fit's, paired by trial."""

import json
import sys

import numpy as np

rows = [json.loads(line) for f in sys.argv[1:] for line in open(f)]
BASE = "full-batch-p100"
for data in sorted({r["data"] for r in rows}):
    for n in sorted({r["rows"] for r in rows if r["data"] == data}):
        sel = [r for r in rows if r["data"] == data and r["rows"] == n]
        trials = sorted({r["trial"] for r in sel})
        print(f"{data}  rows {n}  trials {trials}  single best {np.mean([r['single_best_mean'] for r in sel]):.2f}")
        for config in dict.fromkeys(r["config"] for r in sel):
            mine = [r for r in sel if r["config"] == config]
            secs = np.mean([r["seconds"] for r in mine if r["candidate"] == "rm-interval"])
            parts = []
            for cand in ("rm-interval", "r-and-c", "rm-cluster"):
                got = {r["trial"]: r["mean"] for r in mine if r["candidate"] == cand}
                base = {r["trial"]: r["mean"] for r in sel if r["config"] == BASE and r["candidate"] == cand}
                diff = [got[t] - base[t] for t in trials if t in got and t in base]
                parts.append(f"{cand} {np.mean(list(got.values())):.2f} ({np.mean(diff):+.2f})")
            print(f"  {config:16s} {secs:7.1f} s   " + "   ".join(parts))
