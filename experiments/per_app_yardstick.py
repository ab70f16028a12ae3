"""Yardstick for the platform replay's learning bar ("half of the per-app gain by the third retrain"): what
the logs of that many requests could teach at best. Per tier, each trial logs ROUNDS x REQUESTS of its
team's traffic with every model drawn uniformly (the logging that identifies every app's best model
fastest) and the app of every request known. Two learners: **by mean**, each app's model is the one with the
best mean logged utility there (the tier's best logged model overall where the app had no row of it);
**proven**, an app departs from the tier's best logged model overall only where its best model's mean there
is above that model's by more than a one-sided 95% z-test allows, Bonferroni over the apps (what "publish
only what the logs prove" allows). Scored on the tier's never-sent prompts beside its best single model and
each app's best model (the demo's references).

    python experiments/per_app_yardstick.py DATA LAMBDAS SEED ROUNDS REQUESTS[,REQUESTS...] [LIMIT] [TRIALS]

The world is the demo's with --traffic chat --context {tags} --traffic-share 0.5 --team-apps own.
"""

import sys
import tempfile
from pathlib import Path

import numpy as np

from regret_gateway.bench.demo.world import DemoConfig, prepare
from regret_gateway.confidence import z_critical

data, lams, seed = Path(sys.argv[1]), tuple(float(x) for x in sys.argv[2].split(",")), int(sys.argv[3])
rounds, volumes = int(sys.argv[4]), [int(x) for x in sys.argv[5].split(",")]
limit = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[6] != "-" else None
trials = int(sys.argv[7]) if len(sys.argv) > 7 else 20
cfg = DemoConfig(data=data, limit=limit, seed=seed, lambdas=(lams[0], lams[1], lams[2]), traffic_share=0.5, traffic="chat",
                 context="{tags}", replay=True, team_apps="own", device="cpu")  # fmt: skip
world = prepare(cfg, Path(tempfile.mkdtemp(prefix="yardstick-")), lambda line: print(line, file=sys.stderr))
Q, C, apps = world.bench.quality, world.bench.cost, world.apps
rng = np.random.default_rng([seed, 11])


def table(requests: int) -> None:
    print(
        f"{data.name}, seed {seed}: {rounds} rounds x {requests} requests a tier, uniformly logged, app known; {trials} trials\n"
    )
    print(
        "| tier | λ | best single | per-app best | by mean (mean [min, max]) | its share of the per-app gain | proven | its share |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    shares, proven_shares = [], []
    for k, (_, tier, lam) in enumerate(cfg.tiers):
        held = world.team_rows(world.held_ix, k, len(cfg.tiers), cfg.team_apps)
        traffic = world.team_rows(world.traffic_ix, k, len(cfg.tiers), cfg.team_apps)
        U = Q - lam * C
        single = 100 * U[held, world.best_single_for(lam, held)].mean()
        per_app = 100 * U[held, world.app_best(lam, held)].mean()
        values, proven = [], []
        for _ in range(trials):
            rows = rng.choice(traffic, size=rounds * requests, replace=True)
            drawn = rng.integers(0, Q.shape[1], size=len(rows))
            got = U[rows, drawn]
            overall = np.array([got[drawn == m].mean() if (drawn == m).any() else -np.inf for m in range(Q.shape[1])])
            choice, gated = {}, {}
            base = int(np.argmax(overall))
            z = z_critical(comparisons=len(np.unique(apps[rows])))
            for app in np.unique(apps[rows]):
                here = apps[rows] == app
                means = np.array([got[here & (drawn == m)].mean() if (here & (drawn == m)).any() else -np.inf
                                  for m in range(Q.shape[1])])  # fmt: skip
                choice[app] = int(np.argmax(means)) if np.isfinite(means).all() else base
                best, gated[app] = choice[app], base
                a, b = got[here & (drawn == best)], got[here & (drawn == base)]
                if best != base and len(a) > 1 and len(b) > 1:
                    se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
                    if se > 0 and a.mean() - b.mean() > z * se:
                        gated[app] = best
            for learned, out in ((choice, values), (gated, proven)):
                picks = np.array([learned.get(a, base) for a in apps[held]])
                out.append(100 * U[held, picks].mean())
        v, p = np.array(values), np.array(proven)
        gap = per_app - single
        share = (v.mean() - single) / gap if gap > 0 else float("nan")
        p_share = (p.mean() - single) / gap if gap > 0 else float("nan")
        shares.append(share)
        proven_shares.append(p_share)
        print(f"| {tier} | {lam:g} | {single:.1f} | {per_app:.1f} | {v.mean():.1f} [{v.min():.1f}, {v.max():.1f}] | "
              f"{share:.0%} | {p.mean():.1f} | {p_share:.0%} |")  # fmt: skip
    print(
        f"\nmean share over tiers with a per-app gain: by mean {np.nanmean(shares):.0%}, proven {np.nanmean(proven_shares):.0%}"
    )


for requests in volumes:
    table(requests)
    print()
