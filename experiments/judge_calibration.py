"""The judge-calibration replays side by side: after the last round, per seed, noise and tier, what the
teams got with direct scores and with the judge under each arm, and what the tier served after the last
retrain; and the judge's error the last retrain measured (pooled over models).

    python experiments/judge_calibration.py RUNS_DIR[,RUNS_DIR...] SEEDS NOISES [ARMS]
    # RUNS_DIR holds direct-s{seed} and {arm}-n{noise}-s{seed} (demo --out folders) for every arm;
    # several RUNS_DIRs, one per routing draw (demo --routing-seed), each arm paired with its own draw's
    # direct run: then also every arm's paired gaps over the draws and per tier-seed averaged over them;
    # ARMS default "users,self,raw": corrected by users' scores (--user-share), by the judge's
    # self-agreement (--judge-repeat), taken as it is; "panel": two judges (--judge-panel 2) corrected by users;
# "panel3": three judges (--judge-panel 3) corrected by users;
    # "fit": corrected by users, the outcome networks fitted through the judge's error (judge_error=True; 0a31e6b)
    # "cold": corrected by users, the first router held until every model's rows are worth 650 true scores
    # (--cold-start-rows 650); "again": direct feedback with --routing-seed 1 (folders again-s{seed}), the yardstick;
    # "rows": corrected by users, the cold start counting the judge's scores as rows (the users arm at ade06ee; "users"
    # with --cold-start-rows before it counted them at their worth in true scores); "pooled": corrected by users,
# each model's error rates partially pooled over models (the users arm from 4e95a09); "ppanel3": panel3 from 4e95a09
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

LABELS = {
    "users": "corrected by users",
    "self": "corrected by self-agreement",
    "raw": "as it is",
    "cal": "corrected",
    "panel": "panel of two, corrected by users",
    "panel3": "panel of three, corrected by users",
    "fit": "corrected by users, networks fitted through the error",
    "cold": "corrected by users, cold start of 650 rows' worth",
    "again": "direct, another routing seed",
    "rows": "corrected by users, cold start counted in rows",
    "pooled": "corrected by users, rates pooled over models",
    "ppanel3": "panel of three, corrected by users, rates pooled over models",
}


def run_folder(base: Path, kind: str, noise: str, seed: str) -> Path:
    """Where one arm's run lies: ``again`` (direct feedback with ``--routing-seed 1``) has no noise."""
    return base / (f"again-s{seed}" if kind == "again" else f"{kind}-n{noise}-s{seed}")


def last_round(folder: Path) -> dict[str, dict[str, float]]:
    doc = json.loads((folder / "closed_loop.json").read_text())
    last = max(r["round"] for r in doc["rounds"])
    return {r["tier"]: r["utility"] for r in doc["rounds"] if r["round"] == last}


def measured_error(folder: Path) -> str:
    """The pooled error the last retrain measured: against users' scores, else against itself."""
    reports = sorted(folder.glob("regret-demo-*/reports/retrain-*.json"))
    if not reports:
        return "-"
    judge = json.loads(reports[-1].read_text())["data"].get("judge") or {}
    for key in ("errors", "self_agreement"):
        if "*" in (judge.get(key) or {}):
            return judge[key]["*"].removeprefix("*: ")
    return "-"


def served(folder: Path) -> dict[str, str]:
    """What each tier served after the last retrain (a constant by its model's name)."""
    reports = sorted(folder.glob("regret-demo-*/reports/retrain-*.json"))
    tiers = json.loads(reports[-1].read_text())["tiers"] if reports else []
    return {t["tier"]: t["served"].removeprefix("constant:") for t in tiers}


def over_draws(roots: list[Path], seeds: str, noises: str, kinds: list[str]) -> None:
    """Each arm against direct feedback of the same routing draw (one RUNS_DIR a draw): every tier-run's gap,
    and each tier-seed's gap averaged over the draws."""
    tiers = ("premium", "standard", "economy")
    print("| noise | arm | tier-runs | mean gap to direct, same draw | at most 2 below | within 2 | "
          "tier-seeds at most 2 below, mean of the draws |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|")
    for noise in noises.split(","):
        for k in kinds:
            gap = np.array([[[last_round(run_folder(base, k, noise, seed))[t]["gateway"]
                              - last_round(base / f"direct-s{seed}")[t]["gateway"] for t in tiers]
                             for seed in seeds.split(",")] for base in roots])  # fmt: skip
            runs, mean = gap.ravel(), gap.mean(0).ravel()
            print(
                f"| {noise} | {LABELS[k]} | {runs.size} | {runs.mean():+.2f} | {int((runs >= -2).sum())}/{runs.size} | "
                f"{int((abs(runs) <= 2).sum())}/{runs.size} | {int((mean >= -2).sum())}/{mean.size} |"
            )


def main(root: str, seeds: str, noises: str, arms: str = "users,self,raw") -> None:
    roots = [Path(r) for r in root.split(",")]
    if len(roots) > 1:
        over_draws(roots, seeds, noises, arms.split(","))
        print()
    base = roots[0]
    tiers = ("premium", "standard", "economy")
    kinds = arms.split(",")
    print("| noise | seed | tier | direct: teams | " + " | ".join(f"{LABELS[k]}: teams" for k in kinds) + " | "
          + " | ".join(f"{LABELS[k]} - direct" for k in kinds) + " |")  # fmt: skip
    print("|---:|---:|---|" + "---:|" * (1 + 2 * len(kinds)))
    gaps: dict[tuple[str, str], list[float]] = {}
    errors = []
    for noise in noises.split(","):
        for seed in seeds.split(","):
            direct = last_round(base / f"direct-s{seed}")
            runs = {k: last_round(run_folder(base, k, noise, seed)) for k in kinds}
            for tier in tiers:
                d = direct[tier]["gateway"]  # utility x100, what the teams got
                got = [runs[k][tier]["gateway"] for k in kinds]
                for k, g in zip(kinds, got):
                    gaps.setdefault((noise, k), []).append(g - d)
                print(f"| {noise} | {seed} | {tier} | {d:.1f} | " + " | ".join(f"{g:.1f}" for g in got) + " | "
                      + " | ".join(f"{g - d:+.1f}" for g in got) + " |")  # fmt: skip
            for k in kinds:
                if k not in ("raw", "again"):
                    errors.append((noise, seed, LABELS[k], measured_error(run_folder(base, k, noise, seed))))
    print()
    print("| noise | judge | mean gap to direct (per tier-seed) | worst | tier-seeds within 2 points |")
    print("|---:|---|---:|---:|---:|")
    for (noise, kind), g in gaps.items():
        a = np.array(g)
        print(f"| {noise} | {LABELS[kind]} | {a.mean():+.2f} | {a.min():+.1f} | {int((a >= -2).sum())}/{len(a)} |")
    print()
    print("| noise | seed | tier | direct: served | " + " | ".join(f"{LABELS[k]}: served" for k in kinds) + " |")
    print("|---:|---:|---|" + "---|" * (1 + len(kinds)))
    for noise in noises.split(","):
        for seed in seeds.split(","):
            got = [served(base / f"direct-s{seed}")] + [served(run_folder(base, k, noise, seed)) for k in kinds]
            for tier in tiers:
                print(f"| {noise} | {seed} | {tier} | " + " | ".join(g.get(tier, "-") for g in got) + " |")
    print()
    print("| true flip rate | seed | arm | measured by the last retrain (pooled over models) |")
    print("|---:|---:|---|---|")
    for noise, seed, label, text in errors:
        print(f"| {noise} | {seed} | {label} | {text} |")


if __name__ == "__main__":
    main(*sys.argv[1:5])
