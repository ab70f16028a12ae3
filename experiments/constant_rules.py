"""More ways to choose the constant, tried on the scores `constant_dev.py` saved (CONSTANT_DEV_DUMP=PREFIX):
the chosen constant minus the single best model on the dev prompts, per rule, over every trial and lambda.

    CONSTANT_DEV_DUMP=runs/mm-k1 python experiments/constant_dev.py ../shared/data/mmlupro 5 1 0,50,100 5000
    python experiments/constant_rules.py 'runs/mm-k1-t*.npz'

Rules: `dr` (retrain's), `eb-utility` / `eb-quality` (each mean shrunk toward the others by its standard
error, empirical Bayes, on the utility or on the quality alone), `lcb-quality` (quality one standard
error down), `snips` (self-normalised inverse propensity), `sn-dr` (DR with a self-normalised
correction), `dm`, `half-dm` (quality halfway between DR and DM).
"""

import glob
import sys

import numpy as np


def clustered_se(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    _, inverse = np.unique(groups, return_inverse=True)
    sums = np.zeros((inverse.max() + 1, values.shape[1]))
    np.add.at(sums, inverse, values - values.mean(0))
    return np.sqrt((sums**2).sum(0)) / len(values)


def shrunk(mean: np.ndarray, se: np.ndarray) -> np.ndarray:
    w = 1 / se**2
    mu = (w * mean).sum() / w.sum()
    tau2 = max(1e-12, float(np.var(mean) - np.mean(se**2)))
    return mu + tau2 / (tau2 + se**2) * (mean - mu)


def self_normalised(d, lam: float, dr: bool) -> np.ndarray:
    a, p, y = d["action"], d["propensity"], d["quality"] - lam * d["cost"]
    r = d["q_dm"] - lam * d["c_dm"]
    out = []
    for t in range(d["q_dr"].shape[1]):
        m, w = a == t, 1 / p[a == t]
        out.append(r[:, t].mean() + (w * (y[m] - r[m, t])).sum() / w.sum() if dr else (w * y[m]).sum() / w.sum())
    return np.array(out)


gaps: dict[str, list[float]] = {}
for path in sorted(glob.glob(sys.argv[1])):
    d = np.load(path)
    q, c, g = d["q_dr"], d["c_dr"], d["groups"]
    for lam in d["lams"]:
        true = 100 * (d["test_quality"] - lam * d["test_cost"]).mean(0)
        single = int(np.argmax((d["train_quality"] - lam * d["train_cost"]).mean(0)))
        u = q - lam * c
        rules = {
            "dr": u.mean(0),
            "eb-utility": shrunk(u.mean(0), clustered_se(u, g)),
            "eb-quality": shrunk(q.mean(0), clustered_se(q, g)) - lam * c.mean(0),
            "lcb-quality": q.mean(0) - clustered_se(q, g) - lam * c.mean(0),
            "snips": self_normalised(d, lam, dr=False),
            "sn-dr": self_normalised(d, lam, dr=True),
            "dm": (d["q_dm"] - lam * d["c_dm"]).mean(0),
            "half-dm": (0.5 * q + 0.5 * d["q_dm"] - lam * c).mean(0),
        }
        for rule, value in rules.items():
            gaps.setdefault(rule, []).append(float(true[int(np.argmax(value))] - true[single]))
print("| rule | mean | cases more than 0.5 below | worst |\n|---|---:|---:|---:|")
for rule, v in gaps.items():
    a = np.array(v)
    print(f"| `{rule}` | {a.mean():+.2f} | {int((a < -0.5).sum())} of {len(a)} | {a.min():+.2f} |")
