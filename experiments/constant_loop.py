"""Which constant does the closed loop end on, with the incumbent constant sticky or re-chosen every retrain?
(no networks, no gateway: the demo's traffic, exploration and constant choice in numpy, seconds per run)

Per simulated run s, the shape of `demo --replay --traffic-share 0.5 --seed s` (`bench/demo/world.py`): a
seeded half of the file's prompts is the traffic (a fifth of it held out, never sent), the other half picks
the best single model per lambda with full information (the references). Round 0 is the cold start (uniform
over the models); every round each tier sends REQUESTS prompts drawn with replacement from the sent traffic;
after rounds 0..ROUNDS-2 a retrain values every constant model at each tier's lambda on all rows so far
(every tier's rows, their exact propensities: self-normalised importance weighting, which retrain's DR
constant follows in most trials, learning-curve.md) and the tier then serves its constant with the
product's exploration (`gateway.decisions.exploration_distribution`, IGW over those estimates). The
constant's choice, the one thing the rules differ in:

* ``sticky``: the tier keeps the constant it serves unless the logs' best constant passes the gate against
  it (the paired gain's lower end above 0 at ``0.05 / 4``, two-sided, prompts as units: ope.select's
  Bonferroni over retrain's four challengers) -- retrain's rule when this script was written;
* ``rechosen``: the tier serves the logs' best constant, whatever it served before.

Variants: ``sticky z=...`` a weaker gate (one-sided z instead of 2.50); ``challengers`` the opt-in
exploration rule; ``prompt-paired DR`` values the constants by DR whose outcome model is each model's mean
plus the prompt's difficulty read from the other rows of the same prompt (a prompt is sent ~3 times a
round, under other models too); ``two cold-start rounds`` explores uniformly for two rounds before the
first retrain; ``best lower bound`` re-chooses the constant every retrain by its value minus z standard
errors (pessimistic: a model logged thinly is not chosen on a few heavy weights); ``mix of the tied`` serves a uniform mix of the constants the logs cannot yet tell from
the best (successive elimination at that z; its held-out value is the mix's).

After the last round: the served constant's held-out utility minus the references' best single model's
(the closed loop's held-out bar), what the teams got on the last round's traffic, how often the tier ends on
the references' best single model, and how many times the constant changed.

    python experiments/constant_loop.py DATA LIMIT LAMBDAS RUNS [EPSILON]
    e.g. python experiments/constant_loop.py ../shared/data/llmrouter/llmrouter_train.csv.gz 0 0,500,1500 200
"""

import sys
from statistics import NormalDist

import numpy as np

from regret_gateway.causal.stats import dr_term
from regret_gateway.evaluation.loaders import load_benchmark
from regret_gateway.gateway.decisions import exploration_distribution

ROUNDS, REQUESTS, GAMMA = 5, 2000, 50.0
Z_GATE = NormalDist().inv_cdf(1 - 0.05 / 4 / 2)
RULES = {"sticky": Z_GATE, "sticky z=1.64": 1.645, "sticky z=1": 1.0, "sticky z=0.5": 0.5, "rechosen": None}


def snips_terms(y: np.ndarray, action: np.ndarray, w: np.ndarray, m: int) -> tuple[float, np.ndarray]:
    """Constant ``m``'s SNIPS value and each row's term of its linearised error (value = mean + sum / n)."""
    hit = action == m
    norm = max(w[hit].sum() / len(y), 1e-12)
    value = float((w[hit] * y[hit]).sum() / len(y) / norm)
    return value, np.where(hit, w * (y - value), 0.0) / norm


def snips(y: np.ndarray, action: np.ndarray, w: np.ndarray, m: int) -> float:
    return snips_terms(y, action, w, m)[0]


def prompt_se(terms: np.ndarray, prompt: np.ndarray) -> float:
    """Standard error of the mean of ``terms`` with each prompt's rows one draw."""
    return float(np.sqrt((np.bincount(prompt, weights=terms) ** 2).sum()) / len(terms))


def dr_prompt(y, action, w, prompt, T: int) -> np.ndarray:
    """(n, T) doubly robust scores whose outcome model is each model's SNIPS mean plus the prompt's
    difficulty, read from the other rows of the same prompt that logged another model (never the row itself
    nor the model valued: the prompt's other draws are independent of this row's)."""
    v = np.array([snips(y, action, w, m) for m in range(T)])
    r = y - v[action]
    n_p = prompt.max() + 1
    S, C = np.bincount(prompt, weights=r, minlength=n_p), np.bincount(prompt, minlength=n_p).astype(float)
    key = prompt * T + action
    Sm = np.bincount(key, weights=r, minlength=n_p * T).reshape(n_p, T)
    Cm = np.bincount(key, minlength=n_p * T).reshape(n_p, T).astype(float)
    num = S[prompt][:, None] - Sm[prompt] - np.where(np.arange(T)[None, :] != action[:, None], r[:, None], 0.0)
    den = C[prompt][:, None] - Cm[prompt] - (np.arange(T)[None, :] != action[:, None])
    mu = v[None, :] + np.where(den > 0, num / np.maximum(den, 1), 0.0)
    hit = action[:, None] == np.arange(T)[None, :]
    return dr_term(mu, y[:, None], np.where(hit, w[:, None], 0.0))


def gain_lower_scores(scores, prompt, best: int, inc: int, z: float) -> float:
    d = scores[:, best] - scores[:, inc]
    return float(d.mean()) - z * prompt_se(d - d.mean(), prompt)


def lower_bounds(y, action, w, prompt, T: int, z: float) -> np.ndarray:
    """(T,) each constant's SNIPS value minus z standard errors (prompts as units)."""
    terms = [snips_terms(y, action, w, m) for m in range(T)]
    return np.array([v - z * prompt_se(t, prompt) for v, t in terms])


def gain_lower(y, action, w, prompt, best: int, inc: int, z: float) -> float:
    """Lower end of the paired gain of constant ``best`` over ``inc`` (SNIPS, prompts as units)."""
    (vb, tb), (vi, ti) = snips_terms(y, action, w, best), snips_terms(y, action, w, inc)
    return vb - vi - z * prompt_se(tb - ti, prompt)


def run(bench, lams, seed: int, rule, epsilon: float, exploration: str = "igw", estimator: str = "snips",
        cold_rounds: int = 1, eliminate: float | None = None, pessimistic: float | None = None) -> dict:  # fmt: skip
    """One simulated loop. ``eliminate`` (a z): instead of one constant, the tier serves a uniform mix of the
    constants the logs cannot yet tell from the best (each leaves the set once the best's paired gain over it
    has its lower end above 0 at that z), and the rest of the models share epsilon evenly."""
    n, T = bench.n_samples, len(bench.model_names)
    order = np.random.default_rng(seed).permutation(n)
    cut = int(round(0.5 * n))
    traffic, refs = np.sort(order[:cut]), np.sort(order[cut:])
    order = np.random.default_rng([seed, 1]).permutation(traffic)
    n_held = int(round(0.2 * len(order)))
    held, sent = np.sort(order[:n_held]), np.sort(order[n_held:])
    U = {lam: bench.quality - lam * bench.cost for lam in lams}
    ref_best = {lam: int(np.argmax(U[lam][refs].mean(0))) for lam in lams}
    rng = np.random.default_rng([seed, 99])
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (prompt, action, propensity) per tier-round
    served: dict[float, list[int] | None] = {lam: None for lam in lams}  # the constant, or the eliminated mix
    changes = {lam: 0 for lam in lams}
    teams_last: dict[float, float] = {}
    teams_all: dict[float, float] = {}
    for rnd in range(ROUNDS):
        est = None
        if rnd >= cold_rounds:  # a retrain after the previous round
            prompt = np.concatenate([r[0] for r in rows])
            action = np.concatenate([r[1] for r in rows])
            w = 1.0 / np.concatenate([r[2] for r in rows])
            est = {}
            for lam in lams:
                y = U[lam][prompt, action]
                if estimator == "dr-prompt":
                    scores = dr_prompt(y, action, w, prompt, T)
                    values = scores.mean(0)
                else:
                    values = np.array([snips(y, action, w, m) for m in range(T)])
                inc = served[lam]
                if eliminate is not None:
                    pool = inc if inc is not None else list(range(T))
                    b = max(pool, key=lambda m: values[m])
                    new = [m for m in pool if m == b or gain_lower(y, action, w, prompt, b, m, eliminate) <= 0]
                elif pessimistic is not None:  # the best lower bound, whatever the tier served
                    new = [int(np.argmax(lower_bounds(y, action, w, prompt, T, pessimistic)))]
                else:
                    best = int(np.argmax(values))
                    if rule is None or inc is None or best == inc[0]:
                        new = [best]
                    else:
                        lower = (gain_lower_scores(scores, prompt, best, inc[0], rule) if estimator == "dr-prompt"
                                 else gain_lower(y, action, w, prompt, best, inc[0], rule))  # fmt: skip
                        new = [best] if lower > 0 else inc
                changes[lam] += inc is not None and new != inc
                served[lam], est[lam] = new, values
        for lam in lams:
            prompts = rng.choice(sent, size=REQUESTS, replace=True)
            mix = served[lam]
            if est is None or mix is None:
                p = np.full(T, 1.0 / T)
            elif eliminate is not None:
                p = np.full(T, epsilon / T)
                p[mix] += (1.0 - epsilon) / len(mix)
            else:
                p = exploration_distribution(mix[0], T, epsilon, rule=exploration, utilities=est[lam], gamma=GAMMA)
            action = rng.choice(T, size=REQUESTS, p=p)
            rows.append((prompts, action, p[action]))
            if rnd == ROUNDS - 1:
                teams_last[lam] = float(U[lam][prompts, action].mean())
            teams_all[lam] = teams_all.get(lam, 0.0) + float(U[lam][prompts, action].mean()) / ROUNDS
    out = {}
    for lam in lams:
        final = served[lam]
        assert final is not None
        held_u, truth = U[lam][held].mean(0), U[lam][traffic].mean(0)
        out[lam] = dict(
            held_gap=100 * (held_u[final].mean() - held_u[ref_best[lam]]),
            is_ref=final == [ref_best[lam]],
            teams=100 * teams_last[lam],
            teams_all=100 * teams_all[lam],
            changes=changes[lam],
            truth_gap=100 * (truth[final].mean() - truth.max()),
        )
    return out


def main(path: str, limit: int | None, lams: list[float], runs: int, epsilon: float) -> None:
    bench = load_benchmark(path, limit=limit, seed=0)
    print(f"{path}: {bench.n_samples} prompts, {len(bench.model_names)} models, lambda {lams}, {runs} runs, epsilon {epsilon}")
    print("| rule | held-out - best single, mean over tiers | runs >= 0 on every tier | tier-runs on the references' best single | "
          "tier-runs >= best single held out | traffic: served - best constant (truth) | teams got, last round | teams got, every round | constant changes per tier-run |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    results = {name: [run(bench, lams, s, rule, epsilon) for s in range(runs)] for name, rule in RULES.items()}
    results["sticky, challengers"] = [run(bench, lams, s, Z_GATE, epsilon, "challengers") for s in range(runs)]
    results["sticky, prompt-paired DR"] = [run(bench, lams, s, Z_GATE, epsilon, estimator="dr-prompt") for s in range(runs)]
    results["rechosen, prompt-paired DR"] = [run(bench, lams, s, None, epsilon, estimator="dr-prompt") for s in range(runs)]
    results["sticky, two cold-start rounds"] = [run(bench, lams, s, Z_GATE, epsilon, cold_rounds=2) for s in range(runs)]
    for z in (1.0, Z_GATE):
        results[f"best lower bound, z={z:.2f}"] = [run(bench, lams, s, None, epsilon, pessimistic=z) for s in range(runs)]
    for z in (Z_GATE, 1.0):
        results[f"mix of the tied, z={z:.2f}"] = [run(bench, lams, s, None, epsilon, eliminate=z) for s in range(runs)]
    for rule, res in results.items():
        mean_gap = np.array([np.mean([r[lam]["held_gap"] for lam in lams]) for r in res])
        every = np.mean([all(r[lam]["held_gap"] >= 0 for lam in lams) for r in res])
        is_ref = np.mean([r[lam]["is_ref"] for r in res for lam in lams])
        at_least = np.mean([r[lam]["held_gap"] >= 0 for r in res for lam in lams])
        truth = np.mean([r[lam]["truth_gap"] for r in res for lam in lams])
        teams = np.mean([r[lam]["teams"] for r in res for lam in lams])
        teams_all = np.mean([r[lam]["teams_all"] for r in res for lam in lams])
        changes = np.mean([r[lam]["changes"] for r in res for lam in lams])
        print(
            f"| {rule} | {mean_gap.mean():+.2f} | {every:.2f} | {is_ref:.2f} | {at_least:.2f} | {truth:+.2f} | {teams:.2f} | {teams_all:.2f} | {changes:.2f} |"
        )
    base = np.array([np.mean([r[lam]["held_gap"] for lam in lams]) for r in results["sticky"]])
    for rule, res in results.items():
        if rule != "sticky":
            d = np.array([np.mean([r[lam]["held_gap"] for lam in lams]) for r in res]) - base
            print(f"{rule} - sticky, held out, mean over tiers, paired by run: {d.mean():+.3f} (se {d.std(ddof=1) / np.sqrt(len(d)):.3f}); "
                  f"better in {np.mean(d > 0):.2f}, worse in {np.mean(d < 0):.2f} of runs")  # fmt: skip


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]) or None, [float(v) for v in a[2].split(",")], int(a[3]), float(a[4]) if len(a) > 4 else 0.05)
