"""The judge-calibration replays side by side: after the last round, per seed, noise and tier, what the
teams got with direct scores, with a judge whose scores retrain corrects (users score a share too), and
with the same judge taken as it is; and the judge's error the last retrain measured against the users'.

    python docs/experiments/scripts/judge_calibration.py RUNS_DIR SEEDS NOISES
    # RUNS_DIR holds direct-s{seed}, cal-n{noise}-s{seed}, raw-n{noise}-s{seed} (demo --out folders)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def last_round(folder: Path) -> dict[str, dict[str, float]]:
    doc = json.loads((folder / "closed_loop.json").read_text())
    last = max(r["round"] for r in doc["rounds"])
    return {r["tier"]: r["utility"] for r in doc["rounds"] if r["round"] == last}


def measured_error(folder: Path) -> str:
    reports = sorted(folder.glob("regret-demo-*/reports/retrain-*.json"))
    if not reports:
        return "-"
    judge = json.loads(reports[-1].read_text())["data"].get("judge") or {}
    return judge.get("errors", {}).get("*", "-").removeprefix("*: ")


def main(root: str, seeds: str, noises: str) -> None:
    base = Path(root)
    tiers = ("premium", "standard", "economy")
    print("| noise | seed | tier | direct: teams | judge corrected: teams | judge as it is: teams | corrected - direct | as it is - direct |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    gaps: dict[tuple[str, str], list[float]] = {}
    errors = []
    for noise in noises.split(","):
        for seed in seeds.split(","):
            direct = last_round(base / f"direct-s{seed}")
            cal, raw = last_round(base / f"cal-n{noise}-s{seed}"), last_round(base / f"raw-n{noise}-s{seed}")
            for tier in tiers:
                d, c, r = (x[tier]["gateway"] for x in (direct, cal, raw))  # utility x100
                gaps.setdefault((noise, "corrected"), []).append(c - d)
                gaps.setdefault((noise, "as it is"), []).append(r - d)
                print(f"| {noise} | {seed} | {tier} | {d:.1f} | {c:.1f} | {r:.1f} | {c - d:+.1f} | {r - d:+.1f} |")
            errors.append((noise, seed, measured_error(base / f"cal-n{noise}-s{seed}")))
    print()
    print("| noise | judge | mean gap to direct (per tier-seed) | worst | tier-seeds within 2 points |")
    print("|---:|---|---:|---:|---:|")
    for (noise, kind), g in gaps.items():
        a = np.array(g)
        print(f"| {noise} | {kind} | {a.mean():+.2f} | {a.min():+.1f} | {int((a >= -2).sum())}/{len(a)} |")
    print()
    print("| true flip rate | seed | measured by the last retrain (pooled over models) |")
    print("|---:|---:|---|")
    for noise, seed, text in errors:
        print(f"| {noise} | {seed} | {text} |")


if __name__ == "__main__":
    main(*sys.argv[1:4])
