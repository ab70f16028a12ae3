"""Which full-information reference the demo's ceiling needs: each candidate network fitted on a demo
world's reference prompts (its train split's true outcomes), its time, its utility on the validation prompts
(what picks the ceiling) and on the prompts the demo never sends (what the verdict compares with).

    python experiments/demo_references.py --seeds 0,1,2 [--world-size 6000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import regret_gateway.bench.demo.world as demo_world
from regret_gateway.bench.demo.world import DemoConfig, prepare
from regret_gateway.policy.registry import make_router
from regret_gateway.policy.router import TrainingData

CANDIDATES = ("full-feedback", "full-info-regret", "full-info-regression")


class Captured:
    """Stands in for the demo's FullInformation: keeps the data the demo fits its references on, fits nothing."""

    def __init__(self, train_full, val_full, lams, seed) -> None:
        self.train_full, self.val_full = train_full, val_full


demo_world.FullInformation = Captured  # type: ignore[misc]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--world-size", type=int, default=6000)
    args = ap.parse_args()
    print("| seed | reference | fit s | val utility x100, λ = 0 / 200 / 1000 | never-sent utility x100, λ = 0 / 200 / 1000 |")
    print("|---:|---|---:|---|---|")
    for seed in (int(s) for s in args.seeds.split(",")):
        cfg = DemoConfig(world_size=args.world_size, seed=seed)
        with tempfile.TemporaryDirectory() as tmp:
            world = prepare(cfg, Path(tmp), lambda line: None)
        lams, ref = [lam for _, _, lam in cfg.tiers], world.full_information
        data = TrainingData.from_full(ref.train_full, ref.val_full)
        b = world.bench

        def utility(router, X, quality, cost, lams=lams):
            picks = router.predict(X, lams)
            n = np.arange(len(X))
            return " / ".join(f"{100 * (quality[n, p] - lam * cost[n, p]).mean():.1f}" for lam, p in zip(lams, picks))

        for name in CANDIDATES:
            t = time.perf_counter()
            router = make_router(name, random_state=seed).fit(data, lams)
            took = time.perf_counter() - t
            print(
                f"| {seed} | {name} | {took:.1f} | {utility(router, ref.val_full.X, ref.val_full.quality, ref.val_full.cost)} | "
                f"{utility(router, world.X[world.held_ix], b.quality[world.held_ix], b.cost[world.held_ix])} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
