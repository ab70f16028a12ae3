"""Re-run retrain on a `demo` run's store (its logs up to a time, into a scratch artifact folder) and print
each tier's regional test: per region, the challenger, its gain and standard error, how many rows logged it
there and their effective sample size (Kish's, of the importance weights; the weights' maximum), and the
baseline's.

    python experiments/region_diag.py RUN_WORK_FOLDER UNTIL_ISO_UTC
    e.g. python experiments/region_diag.py runs/ts-llmrouter-s0/regret-demo-XXXX 2026-11-28T11:38:20
"""

import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

import regret_gateway.retrain as retrain_module
import regret_gateway.retrain.gate as gate
from regret_gateway.causal.stats import effective_sample_size
from regret_gateway.config import load_settings
from regret_gateway.policy.regions import clustered_se
from regret_gateway.retrain import pipeline
from regret_gateway.store.engine import make_engine

work, until = Path(sys.argv[1]), datetime.fromisoformat(sys.argv[2]).replace(tzinfo=timezone.utc)
scratch = Path(tempfile.mkdtemp())
shutil.copy(work / "gateway.db", scratch / "gateway.db")
settings = load_settings(work / "config.yaml", store_url=f"sqlite:///{scratch}/gateway.db")
settings = settings.model_copy(update={"artifacts_dir": str(scratch / "artifacts")})
stash = {}
real_held, real_choose = gate.held_out_rows, gate.choose_regions


def held(fits, loggers):
    stash["held"] = real_held(fits, loggers)
    return stash["held"]


def choose(quality, cost, logged, space, groups, b, lam, **kw):
    choice = real_choose(quality, cost, logged, space, groups, b, lam, **kw)
    w, names = 1.0 / stash["held"].data.propensity, stash["held"].logs.model_names
    d = (quality - lam * cost) - (quality[:, [b]] - lam * cost[:, [b]])
    for r in range(space.n_regions):
        rows = np.flatnonzero(space.region == r)
        m = int(choice.models[r]) if choice.adopted[r] else int(np.argmax(d[rows].mean(0)))
        g = np.unique(groups[rows], return_inverse=True)[1]
        hit, base = rows[logged[rows] == m], rows[logged[rows] == b]
        print(f"lambda {lam:g}, region {r}: {len(rows)} rows, {g.max() + 1} prompts, baseline {names[b]}, challenger "
              f"{names[m]} (adopted: {bool(choice.adopted[r])}), gain {100 * d[rows, m].mean():+.2f} se "
              f"{100 * clustered_se(d[rows, m], g):.2f}; challenger logged {len(hit)} rows, ESS {effective_sample_size(w[hit]):.0f}, max "
              f"weight {w[hit].max() if len(hit) else 0:.0f}; baseline {len(base)} rows, ESS {effective_sample_size(w[base]):.0f}")  # fmt: skip
    return choice


gate.held_out_rows = pipeline.held_out_rows = held  # type: ignore[assignment]
gate.choose_regions = choose  # type: ignore[assignment]
result = retrain_module.retrain(settings, make_engine(settings.store.url), retrain_module.RetrainOptions(until=until, n_boot=100))
print(result.status, result.reason)
