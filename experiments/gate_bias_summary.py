"""Summary of gate_bias_dev.py output, per dataset: the error of the DR values (DR minus the true value on
the same logged rows, x100) of the learned candidates (valued out of fold) and of the best constant (chosen
on the same rows), the width of the gate's paired interval, and how often it covered the true gain."""

import json
import sys

import numpy as np

rows = [json.loads(line) for f in sys.argv[1:] for line in open(f)]
print(
    "| data | trial-λ | learned: mean error | learned: RMSE | constant: mean error | constant: RMSE | gain interval width | true gain inside | best ≠ constant: estimated gain | true gain |"
)
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for data in dict.fromkeys(r["data"] for r in rows):
    sel = [r for r in rows if r["data"] == data]
    learned = np.array([r["dr"] - r["true"] for r in sel if not r["candidate"].startswith("constant:")])
    const = np.array([r["dr"] - r["true"] for r in sel if r["candidate"].startswith("constant:")])
    gates = {(r["trial"], r["lam"]): r for r in sel}.values()
    width = np.mean([g["gain_hi"] - g["gain_lo"] for g in gates if g["best"] != g["incumbent"]] or [np.nan])
    inside = [g["gain_lo"] <= g["true_gain"] <= g["gain_hi"] for g in gates if g["best"] != g["incumbent"]]
    est = np.mean([g["gain"] for g in gates if g["best"] != g["incumbent"]] or [np.nan])
    true = np.mean([g["true_gain"] for g in gates if g["best"] != g["incumbent"]] or [np.nan])
    print(f"| {data.rstrip('/').split('/')[-1]} | {len(gates)} | {learned.mean():+.2f} | {np.sqrt((learned**2).mean()):.2f} | "
          f"{const.mean():+.2f} | {np.sqrt((const**2).mean()):.2f} | {width:.1f} | {sum(inside)}/{len(inside)} | {est:+.2f} | {true:+.2f} |")  # fmt: skip
