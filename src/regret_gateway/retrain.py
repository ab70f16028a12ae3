"""``regret-gateway retrain``: from the gateway's logs to a new, checked router, published without a restart.

1. Read decisions with outcome and quality score from the store (``training_set``: rows without a score,
   failed requests and fail-open fallbacks are left out and counted).
2. Check the data: enough rows, enough per model, randomised logging (propensities < 1), overlap
   (minimum propensity, effective sample size per model). Refuse with a clear message otherwise.
3. Split the rows into ``folds`` (5) folds and hold out each in turn (cross-fitting, the default); on the
   other folds fit the nuisance stage (the logged propensities -- exact, the gateway sampled them;
   XGBoost estimates when some rows were imported without one -- and the outcome MLPs), doubly robust
   scores,
4. and the learned routers: RM-Interval (one RM-Softmax policy per configured tier lambda, interval nets
   between them), RM-Cluster (per embedding cluster, the model with the best mean DR score) and R&C (the
   outcome models' argmax). So every row is evaluated, each candidate's choice and the outcome models'
   predictions on it coming from the fit that did not see it; what is published is the first fold's
   fit. ``cross_fit=False`` holds out the first fold only: one fit instead of ``folds``, and the gate
   sees a fifth of the rows (intervals about sqrt(5) times as wide).
5. Per tier, the candidates: those learned routers, the best constant model (the fixed choice, by the
   mean DR score of every row: out of fold where cross-fitted) and what the tier serves now (the active
   router's policy for it). Off-policy evaluation of each on the held-out rows: DR and SNIPS value,
   bootstrap intervals, ESS (cross-fitted: the value of the procedure that trains on 4/5 of the logs,
   on five times the rows). The best
   candidate replaces the incumbent only if the paired bootstrap interval of its gain lies above
   ``margin`` (``force``: whenever it is better). The held-out rows were logged by several policies (each
   tier under each router version); each one's DR correction counts as far as it saw the candidate's
   choices (:mod:`regret_gateway.ope`), so a tier's comparison is not swamped by rows another tier
   explored at tiny propensities. Before any router exists the incumbent is the best
   constant model. So no tier serves something estimated worse than the fixed choice or than what it
   had, and a tier that does not improve keeps its policy while the others update.
6. Write the versioned artifact -- a per-tier policy with this retrain's utility estimates, which
   exploration reads -- point ``ACTIVE`` at it and mark it active in the store: the gateway swaps it in
   on its next reload check. "published" when a tier changed (or none was served before); "kept" when
   every tier serves what it served, with only the estimates renewed.
7. Report: a table per tier and candidate, which one each tier serves and why; JSON and PNG.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from regret_gateway.artifacts import ArtifactError, RouterArtifact, activate, active_version_id, load_artifact, save_artifact
from regret_gateway.causal.stats import effective_sample_size
from regret_gateway.config import Settings
from regret_gateway.data import LoggedFeedback
from regret_gateway.ope import LoggedData, PolicyValue, select
from regret_gateway.servable import ConstantPolicy, PerTierPolicy, ServablePolicy


class RetrainRefused(ValueError):
    """The logs cannot support a router (the message says why); nothing was published."""


@dataclass(frozen=True)
class RetrainOptions:
    since: datetime | None = None
    until: datetime | None = None
    team: str | None = None
    feedback: tuple[str, ...] | None = None  # quality sources to learn from, in order (None: all, user first, judge last)
    margin: float = 0.0  # a candidate must beat the incumbent by more than this (lower end of the paired 95% CI)
    force: bool = False
    folds: int = 5  # the rows split into this many folds; what a fit on the others learned is evaluated on a fold
    cross_fit: bool = True  # every fold held out once (``folds`` fits, every row evaluated); False: the first (one fit)
    min_rows: int = 200
    min_rows_per_model: int = 20
    min_ess_per_model: float = 10.0
    n_boot: int = 300
    seed: int = 0
    out: Path | None = None  # report folder (default: the new version's folder, or artifacts/reports)


@dataclass(frozen=True)
class TierEvaluation:
    """What one tier serves after retrain, and why: every candidate's off-policy value on the held-out rows
    and the paired gain of the best one over the incumbent (what the tier served before: the active
    router, or before any the best constant model)."""

    tier: str
    lam: float
    served: str  # the candidate the tier serves now
    incumbent: str
    reason: str
    values: dict[str, PolicyValue]  # every candidate's DR/SNIPS value
    gain: float  # DR value of the best candidate minus the incumbent's
    gain_ci: tuple[float, float]
    traffic_changing_model: float  # share of the logged requests the published policy sends elsewhere than the incumbent
    model_mix: dict[str, float]  # share of the logged requests per model under the published policy (not the fold fits)

    @property
    def new(self) -> PolicyValue:
        return self.values[self.served]

    @property
    def reference(self) -> PolicyValue:
        return self.values[self.incumbent]

    @property
    def changed(self) -> bool:
        return self.served != self.incumbent


@dataclass
class RetrainResult:
    status: str  # published | kept | refused
    reason: str
    version: str | None = None
    active_before: str | None = None
    data: dict = field(default_factory=dict)
    tiers: list[TierEvaluation] = field(default_factory=list)
    seconds: dict = field(default_factory=dict)
    report_paths: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def check_data(logged: LoggedFeedback | None, skipped: dict, opts: RetrainOptions) -> dict:
    """Diagnostics of the training logs; raises :class:`RetrainRefused` when they cannot support a router."""
    left_out = ", ".join(f"{k}={v}" for k, v in skipped.items() if v) or "none"
    if logged is None or logged.n_samples == 0:
        raise RetrainRefused(
            f"no usable rows (left out: {left_out}); rows need an outcome and a quality score "
            "(POST /regret/feedback or `regret-gateway feedback import`)"
        )
    if logged.n_samples < opts.min_rows:
        raise RetrainRefused(f"only {logged.n_samples} usable rows, at least {opts.min_rows} needed (left out: {left_out})")
    counts = logged.counts()
    few = [f"{m} ({int(c)})" for m, c in zip(logged.model_names, counts) if c < opts.min_rows_per_model]
    if few:
        raise RetrainRefused(
            f"too few logged rows for {', '.join(few)}; every model needs {opts.min_rows_per_model}. "
            "Raise exploration (tier epsilon) or remove the model from `models`."
        )
    info = {
        "rows": int(logged.n_samples),
        "rows_per_model": {m: int(c) for m, c in zip(logged.model_names, counts)},
        "left_out": dict(skipped),
    }
    p = logged.propensity
    if p is None:  # imported logs among the rows: propensities are estimated (XGBoost), overlap unknown here
        return {**info, "propensity": "estimated (XGBoost): some rows were imported without a logged propensity"}
    if np.all(p >= 1.0 - 1e-12):
        raise RetrainRefused(
            "every logged propensity is 1: the logging was not randomised, so the outcome of any "
            "other model cannot be estimated without bias. Set epsilon > 0 on the tiers and log more."
        )
    ess = {m: effective_sample_size(1.0 / p[logged.action == t]) for t, m in enumerate(logged.model_names)}
    low = [f"{m} ({v:.1f})" for m, v in ess.items() if v < opts.min_ess_per_model]
    if low:
        raise RetrainRefused(
            f"effective sample size too small for {', '.join(low)} (need {opts.min_ess_per_model}): "
            "a few rows with tiny propensities dominate"
        )
    return {**info, "propensity": "logged", "min_propensity": float(p.min()), "ess_per_model": ess}


def _train_config(n: int):
    """Full-batch Adam at lr 1e-3 (the ``fast`` preset) with the paper's patience of 100 epochs up to 5,000
    rows; beyond, mini-batches of 1,024 for at most 40 epochs (patience 5): a fixed number of passes, so
    the time grows linearly with the rows.

    Why patience 100 and not ``fast``'s 50: with a few hundred logged rows the validation share is a few
    dozen rows, and a network that has waited 50 full-batch steps without a better validation regret is
    stopped for good; on uniform logs of the generated world (360 and 720 rows, 5 seeds each) that cost
    the lambda=1000 tier 2-7 points in 3 of the 10 fits (1.4-1.5 on the mean over seeds), and patience 100
    gave them back (README)."""
    from regret_gateway.nn.training import TrainConfig

    if n <= 5_000:
        return TrainConfig(patience=100)
    return TrainConfig(batch_size=1024, max_epochs=40, patience=5)


def _split(n: int, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rest, held): a seeded random ``share`` of the rows held out."""
    order = np.random.default_rng(seed).permutation(n)
    n_held = max(1, int(round(share * n)))
    return np.sort(order[n_held:]), np.sort(order[:n_held])


def folds_of(n: int, k: int, seed: int) -> list[np.ndarray]:
    """``k`` seeded random folds of ``n`` rows, each sorted, sizes within one of each other."""
    if not 2 <= k <= n:
        raise ValueError(f"`folds` must be between 2 and the number of rows ({n}), got {k}")
    return [np.sort(f) for f in np.array_split(np.random.default_rng(seed).permutation(n), k)]


def production_learner(n_rows: int, tier_lams: list[float], *, imported: bool, seed: int = 0):
    """The learner ``retrain`` publishes from: exact logged propensities (XGBoost where some rows were
    imported without one), outcome MLPs, DR scores, RM-Interval over the tier lambdas."""
    from regret_gateway.causal.estimators import DoublyRobust, Nuisance
    from regret_gateway.causal.outcome import OutcomeModel
    from regret_gateway.causal.propensity import LoggedPropensity, PropensityModel
    from regret_gateway.policy.learner import Learner
    from regret_gateway.policy.tiers import RMInterval

    config = _train_config(n_rows)
    nuisance = Nuisance(
        propensity=PropensityModel() if imported else LoggedPropensity(),
        outcome=OutcomeModel(train=config),
        estimator=DoublyRobust(),
        random_state=seed,
    )
    return Learner(nuisance=nuisance, policy=RMInterval(tiers=sorted(tier_lams), train=config, random_state=seed))


def fit_router(logged: LoggedFeedback, tier_lams: list[float], *, seed: int = 0):
    """Fit the production learner on ``logged`` (1/8 of it held out for early stopping). Returns the
    fitted :class:`~regret_gateway.policy.learner.Learner`."""
    train_ix, val_ix = _split(logged.n_samples, 0.125, seed + 1)  # validation: early stopping only
    tr, va = logged.subset(train_ix), logged.subset(val_ix)
    learner = production_learner(tr.n_samples, tier_lams, imported=logged.propensity is None, seed=seed)
    return learner.fit(tr, va, sorted(tier_lams))


def _read(settings: Settings, engine: Engine, opts: RetrainOptions):
    from regret_gateway.store.repository import training_set

    with Session(engine) as session:
        return training_set(
            session,
            model_names=settings.models,
            since=opts.since,
            until=opts.until,
            team=opts.team,
            embedding_model=settings.embedder.embedding_id,
            feedback=opts.feedback,
        )


def _active(settings: Settings, active_id: str | None, data_info: dict) -> RouterArtifact | None:
    if active_id is None:
        return None
    try:
        return load_artifact(
            Path(settings.artifacts_dir) / active_id, models=settings.models, embedder_model=settings.embedder.embedding_id
        )
    except ArtifactError as exc:
        data_info["active_unreadable"] = str(exc)
        return None


FIXED = "constant"  # label prefix of the best constant model, the fixed choice every tier can fall back to


@dataclass(frozen=True)
class CrossFit:
    """The fits of cross-fitting: ``learners[k]`` was fitted on every row of ``logged`` but ``folds[k]``."""

    logged: LoggedFeedback
    folds: list[np.ndarray]
    learners: list

    @property
    def order(self) -> np.ndarray:
        """(n,) the rows in fold order: how the out-of-fold arrays of :func:`evaluate` are laid out."""
        return np.concatenate(self.folds)


def cross_fit(logged: LoggedFeedback, tier_lams: list[float], *, folds: int, every: bool = True, seed: int = 0) -> CrossFit:
    """One :func:`fit_router` per fold, each on the other folds (``every=False``: the first fold only)."""
    parts = folds_of(logged.n_samples, folds, seed)[: None if every else 1]
    everything = np.arange(logged.n_samples)
    learners = [fit_router(logged.subset(np.setdiff1d(everything, f)), tier_lams, seed=seed) for f in parts]
    return CrossFit(logged, parts, learners)


def learned_candidates(learner, model_names: tuple[str, ...], lams: list[float]) -> tuple[dict[str, ServablePolicy], int]:
    """The routers one fit offers every tier: the RM routers (RM-Interval, the paper's; RM-Cluster, regret
    minimisation over embedding clusters) and R&C (the outcome models' argmax); and RM-Cluster's number of
    clusters (with one it is a constant model: the fixed choice, from fewer rows)."""
    from regret_gateway.policy.cluster import RMCluster

    cluster = RMCluster(random_state=learner.policy.random_state).fit(learner.data_, lams)
    policies = {
        "rm-interval": learner.policy_.to_policy(),
        "r-and-c": learner.nuisance_.outcome_.to_policy(model_names),
        "rm-cluster": cluster.to_policy(),
    }
    return policies, cluster.k_


def _incumbent(active: RouterArtifact | None, lam: float, model_names: tuple[str, ...]) -> tuple[str, ServablePolicy] | None:
    """(label, policy) of what the active router serves at ``lam``, if it routes over the same models."""
    if active is None or active.model_names != model_names:
        return None
    policy = active.policy
    if isinstance(policy, PerTierPolicy):
        sub = policy.policy_for(lam)
        label = policy.labels[next(i for i, p in enumerate(policy.policies) if p is sub)]
        return f"{label} ({active.version})", sub
    return f"{policy.kind} ({active.version})", policy


def evaluate(
    fits: CrossFit,
    tiers,
    active: RouterArtifact | None,
    opts: RetrainOptions,
    loggers: np.ndarray | None = None,
) -> tuple[list[TierEvaluation], PerTierPolicy]:
    """Per tier: every candidate's DR/SNIPS value on the held-out folds' rows (every row when cross-fitted)
    and the choice of what to serve (:func:`regret_gateway.ope.select`). A learned candidate's choice on
    fold k and the outcome models' predictions there come from ``fits.learners[k]``; the best constant
    model is chosen on the DR scores of every row -- out of fold where cross-fitted, else the held-out
    fold's and the fit's own -- (the most data for the fixed choice; that the evaluation rows chose it
    favours it in the comparison, which errs on the safe side). ``loggers`` (n,) names the policy that logged each
    row (tier and router version, :func:`logger_labels`): each logger's DR correction is then weighted by
    what it knows about a candidate's choices (:mod:`regret_gateway.ope`). Returns the evaluations and the
    per-tier policy they describe -- the learned candidates of the first fold's fit -- with its R&C
    outcome networks as the utility estimator (exploration reads it, whatever a tier serves)."""
    order, names = fits.order, fits.logged.model_names
    hold, parts = fits.logged.subset(order), [fits.logged.subset(f) for f in fits.folds]
    held = [learner.nuisance_.held_out(part) for learner, part in zip(fits.learners, parts)]  # each fold by its own fit
    scores = held[0][0].concat(*(h[0] for h in held[1:]))
    q_hat, c_hat = np.concatenate([h[2] for h in held]), np.concatenate([h[3] for h in held])
    p_hold = np.clip(np.concatenate([h[1] for h in held]), 1e-3, 1.0) if hold.propensity is None else hold.propensity
    if len(parts) == 1:  # one fold held out: the fixed choice reads the fit's own rows too (in-sample scores)
        scores = scores.concat(fits.learners[0].data_.scores, fits.learners[0].data_.val_scores)
    strata = None if loggers is None else np.asarray(loggers)[order]
    data = LoggedData(hold.action, hold.quality, hold.cost, p_hold, q_hat, c_hat, strata=strata)
    lams = [spec.lam for _, spec in tiers]
    learned = [learned_candidates(learner, names, lams) for learner in fits.learners]
    published, k_clusters = learned[0]
    labels = [label for label in published if label != "rm-cluster" or k_clusters > 1]
    rows, served_policies, served_labels = [], [], []
    for name, spec in tiers:
        best = names[scores.best_constant(spec.lam)]
        fixed = f"{FIXED}:{best}"
        pool: dict[str, ServablePolicy] = {**{label: published[label] for label in labels}, fixed: ConstantPolicy(names, best)}
        actions = {
            label: np.concatenate([fold[label].choose(part.X, spec.lam) for (fold, _), part in zip(learned, parts)])
            for label in labels
        }
        actions[fixed] = pool[fixed].choose(hold.X, spec.lam)
        incumbent, current = fixed, _incumbent(active, spec.lam, names)
        if current is not None:
            incumbent = current[0]
            pool[incumbent] = current[1]
            actions[incumbent] = current[1].choose(hold.X, spec.lam)
        sel = select(
            data, actions, incumbent, spec.lam, required=opts.margin, force=opts.force, n_boot=opts.n_boot, seed=opts.seed
        )
        # what the published policy does with these requests: a learned candidate's actions above are its
        # fold fits' (out of fold); the constant's and the incumbent's are their published choices already
        served = pool[sel.served].choose(hold.X, spec.lam) if sel.served in labels else actions[sel.served]
        mix = np.bincount(served, minlength=hold.n_models) / len(served)
        changing = float(np.mean(served != actions[incumbent]))
        rows.append(
            TierEvaluation(name, spec.lam, sel.served, incumbent, sel.reason(), sel.values, sel.gain, sel.gain_ci, changing,
                           {m: float(v) for m, v in zip(names, mix)})
        )  # fmt: skip
        served_policies.append(pool[sel.served])
        served_labels.append(sel.served.split(" (")[0])
    estimator = published["r-and-c"]  # this retrain's outcome networks: every tier's utility estimates for exploration
    return rows, PerTierPolicy(lams, served_policies, served_labels, estimator)


def logger_labels(tiers: tuple[str, ...], versions: tuple[str | None, ...]) -> np.ndarray:
    """(n,) the logging policy of each row: its tier under the router version that chose it (cold start:
    no version). Rows of one label were drawn from one randomised policy."""
    return np.array([f"{tier}|{version or 'cold-start'}" for tier, version in zip(tiers, versions)])


def publish(settings: Settings, engine: Engine, policy: ServablePolicy, rows: list[TierEvaluation], data_info: dict) -> Path:
    """Write the versioned artifact, point ``ACTIVE`` at it and mark it active in the store."""
    from regret_gateway.store.repository import publish_version

    root = Path(settings.artifacts_dir)
    tiers = [{**asdict(r), "changed": r.changed} for r in rows]
    metrics = json.loads(json.dumps({"tiers": tiers, "data": data_info}, default=float))  # plain JSON types
    e = settings.embedder
    embedder = {"model": e.model, "template": e.template, "id": e.embedding_id}
    path = save_artifact(root, policy=policy, tiers={n: s.lam for n, s in settings.tiers_by_lambda()}, embedder=embedder,
                         metrics=metrics)  # fmt: skip
    activate(root, path.name)
    with Session(engine) as session, session.begin():
        publish_version(session, path.name, str(path.resolve()), metrics)
    return path


def retrain(settings: Settings, engine: Engine, opts: RetrainOptions = RetrainOptions()) -> RetrainResult:
    """Run the whole pipeline once: read, check, fit, evaluate, gate, publish, report. Never raises for bad
    data: a refusal is a result with status 'refused'."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    root = Path(settings.artifacts_dir)
    active_id = active_version_id(root)
    ts = _read(settings, engine, opts)
    timings["read"] = time.perf_counter() - t0
    try:
        if len(settings.models) < 2:
            raise RetrainRefused("`models` must list at least 2 models")
        data_info = {**check_data(ts.logged, ts.skipped, opts), "rows_by_source": ts.rows_by_source(),
                     "feedback_spend_usd": ts.spend_by_source}  # fmt: skip
    except RetrainRefused as exc:
        result = RetrainResult("refused", str(exc), active_before=active_id,
                               data={"left_out": ts.skipped, "rows": ts.n_rows, "rows_by_source": ts.rows_by_source(),
                                     "feedback_spend_usd": ts.spend_by_source})  # fmt: skip
        _write_report(result, opts.out or root / "reports")
        return result
    logged = ts.logged
    tiers = settings.tiers_by_lambda()
    t1 = time.perf_counter()
    fits = cross_fit(logged, [spec.lam for _, spec in tiers], folds=opts.folds, every=opts.cross_fit, seed=opts.seed)
    data_info["evaluation"] = (
        f"cross-fitted, {opts.folds} folds: every row held out once" if opts.cross_fit else f"1/{opts.folds} of the rows held out"
    )
    timings["fit"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    active = _active(settings, active_id, data_info)
    rows, policy = evaluate(fits, tiers, active, opts, logger_labels(ts.tiers, ts.router_versions))
    timings["evaluate"] = time.perf_counter() - t2
    # published even when every tier keeps what it serves: the new version carries this retrain's utility
    # estimates, which exploration reads; with the old ones it would keep exploring where the first
    # retrain's estimates pointed, and the comparisons the gate has to make next would get no new rows
    path = publish(settings, engine, policy, rows, data_info)
    if active is not None and not any(r.changed for r in rows):
        status = "kept"
        reason = (
            f"no candidate is confidently better than what each tier serves -- the active router stays (republished as "
            f"{path.name} with this retrain's utility estimates for exploration): "
            + "; ".join(f"{r.tier}: {r.reason}" for r in rows)
        )
    else:
        status, reason = "published", "; ".join(f"{r.tier} serves {r.served} ({r.reason})" for r in rows)
    timings["total"] = time.perf_counter() - t0
    result = RetrainResult(
        status, reason, version=path.name, active_before=active_id, data=data_info, tiers=rows, seconds=timings
    )
    _write_report(result, opts.out or path)
    return result


def report_table(result: RetrainResult) -> str:
    """Markdown table per tier and candidate: estimated utility x100 (DR, 95% CI), SNIPS, quality, cost per
    1k requests, ESS; which candidate each tier serves, and why."""
    lines = [
        "| tier | λ | candidate | utility x100 (DR, 95% CI) | SNIPS x100 | quality | $ per 1k req | ESS | serves |",
        "|---|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for row in result.tiers:
        for label, v in row.values.items():
            mark = "**served**" if label == row.served else ("incumbent" if label == row.incumbent else "")
            lines.append(
                f"| {row.tier} | {row.lam:g} | {label} | {100 * v.dr:.2f} [{100 * v.dr_ci[0]:.2f}, {100 * v.dr_ci[1]:.2f}] | "
                f"{100 * v.snips:.2f} | {v.quality:.3f} | {1000 * v.cost:.3f} | {v.ess:.0f} | {mark} |"
            )
    lines.append("")
    lines += [f"- {row.tier}: serves {row.served} -- {row.reason}" for row in result.tiers]
    return "\n".join(lines)


def _write_report(result: RetrainResult, folder: Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stem = "report" if result.version and folder.name == result.version else f"retrain-{datetime.now():%Y%m%d-%H%M%S}"
    json_path = folder / f"{stem}.json"
    json_path.write_text(json.dumps(result.to_dict(), indent=2, default=float))
    result.report_paths = {"json": str(json_path)}
    try:
        import matplotlib  # noqa: F401  (the `train` extra)
    except ImportError:
        return  # a gateway-only install: the JSON report, no plot
    if result.tiers:
        png = folder / f"{stem}.png"
        _plot(result, png)
        result.report_paths["png"] = str(png)
        json_path.write_text(json.dumps(result.to_dict(), indent=2, default=float))


def _plot(result: RetrainResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tiers = result.tiers
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    x = np.arange(len(tiers))

    def group(label: str) -> str:
        return "incumbent" if label.endswith(")") else label.split(":")[0]

    groups = list(dict.fromkeys(group(label) for t in tiers for label in t.values))
    width = 0.8 / len(groups)
    for k, g in enumerate(groups):
        for j, t in enumerate(tiers):
            label = next((lab for lab in t.values if group(lab) == g), None)
            if label is None:
                continue
            v = t.values[label]
            ax1.bar(x[j] + (k - (len(groups) - 1) / 2) * width, 100 * v.dr, width, color=f"C{k}",
                    yerr=[[100 * (v.dr - v.dr_ci[0])], [100 * (v.dr_ci[1] - v.dr)]], capsize=3,
                    edgecolor="black" if label == t.served else "none", linewidth=2,
                    label=g if j == 0 or not any(group(lab) == g for tt in tiers[:j] for lab in tt.values) else None)  # fmt: skip
    ax1.set_xticks(x, [f"{t.tier}\nλ={t.lam:g}" for t in tiers])
    ax1.set_ylabel("estimated utility x100 (DR, 95% CI)")
    ax1.set_title(f"retrain: {result.status} (black edge: served)")
    ax1.legend(fontsize=8)
    models = list(tiers[0].model_mix)
    bottom = np.zeros(len(tiers))
    for m in models:
        share = np.array([t.model_mix[m] for t in tiers])
        ax2.bar(x, share, 0.6, bottom=bottom, label=m)
        bottom += share
    ax2.set_xticks(x, [t.tier for t in tiers])
    ax2.set_ylabel("share of held-out requests")
    ax2.set_title("model mix of what each tier serves")
    ax2.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
