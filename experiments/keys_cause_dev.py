"""Dev study: what a tier's per-row DR scores say of each model on one task, beside the truth. Re-runs, on
a demo's store as it stood at one retrain, retrain's read and cross-fitted fits, and prints for the tier's
own held-out rows of each task asked for, per model: the plain DR score's mean, the scores pooled over
loggers (causal/pooling.py) over all rows and per task, the truth of the same rows (the demo's file has
every outcome), and how often the model was logged there.

    python experiments/keys_cause_dev.py WORK_DIR ROUND DATA SEED LAMBDAS TIER TASK[,TASK...]

WORK_DIR: the demo's work folder (``regret-demo-*`` under its --out); ROUND: the retrain after that round;
the other arguments as the demo's (--traffic chat --context {tags} --traffic-share 0.5 --team-apps own).
"""

import sys
from pathlib import Path

import numpy as np
from demo_store import store_at

from regret_gateway.bench.demo.world import DemoConfig
from regret_gateway.causal.pooling import pooled_scores
from regret_gateway.retrain.fits import held_out_rows, out_of_fold_fits

work, rnd, data, seed = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
lams, tier, tasks = tuple(float(x) for x in sys.argv[5].split(",")), sys.argv[6], sys.argv[7].split(",")
cfg = DemoConfig(data=data, seed=seed, lambdas=lams, traffic_share=0.5, traffic="chat", context="{tags}", replay=True,
                 team_apps="own")  # fmt: skip
world, settings, engine, ts, prompt = store_at(work, rnd, cfg)
logged = ts.logged
fits = out_of_fold_fits(logged, [spec.lam for _, spec in settings.tiers_by_lambda()], seed=seed)
held = held_out_rows(fits, ts.logger_codes(), ts.favoured)
P = prompt[fits.order]
own = ts.populations([tier])[tier][fits.order] & (P >= 0)
lam = settings.tiers[tier].lam
names = logged.model_names
col = np.array([world.models.index(m) for m in names])
truth = world.bench.quality[P][:, col] - lam * world.bench.cost[P][:, col]
task = world.bench.groups[P]
plain = held.held[0].scores.concat(*(h.scores for h in held.held[1:]))
every = pooled_scores(held.data)
by_task = pooled_scores(held.data, blocks=task)
for t in tasks:
    r = own & (task == t)
    print(f"\n{tier}'s held-out rows of {t}: {r.sum()}\n")
    print("| model | logged there | their mean observed | plain DR | pooled, all rows | pooled, per task | truth |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    errors = np.zeros(3)
    for m, name in enumerate(names):
        hit = r & (held.logs.action == m)
        values = [100 * (s.quality[r, m] - lam * s.cost[r, m]).mean() for s in (plain, every, by_task)]
        true = 100 * truth[r, m].mean()
        errors += np.abs(np.array(values) - true)
        seen = f"{100 * held.data.quality[hit].mean():.1f}" if hit.any() else "-"
        print(f"| {name} | {hit.sum()} | {seen} | " + " | ".join(f"{v:.1f}" for v in values) + f" | {true:.1f} |")
    print("| mean absolute error | | | " + " | ".join(f"{e / len(names):.1f}" for e in errors) + " | |")
