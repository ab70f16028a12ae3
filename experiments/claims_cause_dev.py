"""Dev study: why a published claim misses its truth. Re-runs, on a demo's store as it stood at one retrain,
retrain's read, cross-fitted fits and gate (the same code, the same seed), and for every candidate of every
tier prints its DR value and 95% interval on the held-out logged rows beside the truth of the same choices
on the same rows (the demo's file has every model's outcome on every prompt), the plain one-logger DR,
its effective sample size, and the truth of the published fit's choices on the prompts never sent.

    python experiments/claims_cause_dev.py WORK_DIR ROUND DATA SEED LAMBDAS > out.jsonl

WORK_DIR: the demo's work folder (``regret-demo-*`` under its --out); ROUND: the retrain after that round
(0 = the first); the other arguments as the demo's (--traffic chat --context {tags} --traffic-share 0.5).
"""

import json
import sys
from pathlib import Path

import numpy as np
from demo_store import store_at

from regret_gateway.artifacts import load_artifact
from regret_gateway.bench.demo.world import DemoConfig
from regret_gateway.causal.ope import LoggedData
from regret_gateway.retrain.fits import held_out_rows, out_of_fold_fits
from regret_gateway.retrain.gate import evaluate, learned_candidates
from regret_gateway.retrain.publish import serving_now

work, rnd, data, seed = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
lams = tuple(float(x) for x in sys.argv[5].split(","))
cfg = DemoConfig(data=data, seed=seed, lambdas=lams, traffic_share=0.5, traffic="chat", context="{tags}", replay=True)
world, settings, engine, ts, prompt = store_at(work, rnd, cfg)
versions = sorted(p for p in (work / "artifacts").iterdir() if p.is_dir())
active = load_artifact(versions[rnd - 1], models=settings.models) if rnd > 0 else None
logged = ts.logged
tiers = settings.tiers_by_lambda()
fits = out_of_fold_fits(logged, [spec.lam for _, spec in tiers], seed=seed)
loggers = ts.logger_codes()
held = held_out_rows(fits, loggers, ts.favoured)
incumbents = serving_now(active, logged.model_names) if active is not None else None
rows, router = evaluate(fits, tiers, incumbents, loggers, seed=seed, held=held, n_boot=200,
                        code=settings.embedder.context_code)  # fmt: skip
order = fits.order
P = prompt[order]
names = logged.model_names
col = np.array([world.models.index(m) for m in names])
parts = [fits.logged.subset(f) for f in fits.folds]
plain = LoggedData(held.data.logged, held.data.quality, held.data.cost, held.data.propensity, held.data.quality_hat,
                   held.data.cost_hat, groups=held.data.groups)  # fmt: skip
for te in rows:
    lam = te.lam
    acts_of = {}
    U = world.bench.quality[P][:, col] - lam * world.bench.cost[P][:, col]
    # each candidate's actions on the held-out rows as the gate valued them: a learned one's by each fold's fit
    offered = [learned_candidates(lr, names, [lam])[0] for lr in fits.learners]
    for label, value in te.values.items():
        cand = te.candidates[label]
        if label in ("rm-interval", "r-and-c", "rm-cluster"):
            acts = np.concatenate([fold[label].choose(p.X, lam) for fold, p in zip(offered, parts)])
        elif incumbents and label == te.incumbent and label in {t.candidate.label for t in incumbents.values()}:
            acts = incumbents[te.tier].policy.choose(held.logs.X, lam)
        elif cand.model is not None and label.startswith("constant"):
            acts = np.full(len(order), names.index(cand.model))
        else:
            continue
        truth = float(100 * U[np.arange(len(order)), acts].mean())
        one = plain.value(acts, lam, n_boot=200, seed=seed)
        acts_of[label] = acts
        print(json.dumps({"round": rnd, "tier": te.tier, "candidate": label, "incumbent": te.incumbent,
                          "served": te.served, "dr": 100 * value.dr, "ci": [100 * value.dr_ci[0], 100 * value.dr_ci[1]],
                          "truth_rows": truth, "plain_dr": 100 * one.dr,
                          "plain_ci": [100 * one.dr_ci[0], 100 * one.dr_ci[1]], "ess": value.ess,
                          "match": value.match_rate, "gain": 100 * te.gain,
                          "gain_ci": [100 * te.gain_ci[0], 100 * te.gain_ci[1]]}), flush=True)  # fmt: skip
    if te.incumbent in acts_of:
        base = acts_of[te.incumbent]
        family = 0.05 / max(1, len(te.values) - 1)
        for label, acts in acts_of.items():
            if label == te.incumbent:
                continue
            true_gain = float(100 * (U[np.arange(len(order)), acts] - U[np.arange(len(order)), base]).mean())
            g, ci = plain.gain(acts, base, lam, n_boot=200, alpha=family, seed=seed)
            gw, ciw = held.data.gain(acts, base, lam, n_boot=200, alpha=family, seed=seed)
            print(json.dumps({"round": rnd, "tier": te.tier, "gain_of": label, "over": te.incumbent, "true": true_gain,
                              "weighted": [100 * gw, 100 * ciw[0], 100 * ciw[1]],
                              "plain": [100 * g, 100 * ci[0], 100 * ci[1]]}), flush=True)  # fmt: skip
