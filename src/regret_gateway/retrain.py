"""``regret-gateway retrain``: from the gateway's logs to a new, checked router, published without a restart.

1. Read decisions with outcome and quality score from the store (``training_set``: rows without a score,
   failed requests and fail-open fallbacks are left out and counted).
2. Check the data: enough rows, enough per model, randomised logging (propensities < 1), overlap
   (minimum propensity, effective sample size per model). Refuse with a clear message otherwise.
3. Hold out a share of the rows for evaluation; fit the nuisance stage on the rest (the logged
   propensities -- exact, the gateway sampled them; XGBoost estimates when some rows were imported
   without one -- and the outcome MLPs), doubly robust scores.
4. Train RM-Interval: one RM-Softmax policy per configured tier lambda, interval nets between them.
5. Off-policy evaluation on the held-out rows, per tier: DR and SNIPS value of the new router, of the
   active one (or, before any, of the logging policy itself), bootstrap intervals, ESS, and the share of
   traffic that would change model. Publish only if no tier is worse than the active router by more than
   ``margin`` (utility units), unless ``force``.
6. Write the versioned artifact, point ``ACTIVE`` at it and mark it active in the store: the gateway
   swaps it in on its next reload check.
7. Report: a table per tier, JSON and PNG.
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
from regret_gateway.ope import PolicyValue, on_policy_value, policy_value


class RetrainRefused(ValueError):
    """The logs cannot support a router (the message says why); nothing was published."""


@dataclass(frozen=True)
class RetrainOptions:
    since: datetime | None = None
    until: datetime | None = None
    team: str | None = None
    margin: float = 0.0  # a tier may lose at most this much estimated utility vs the active router (< 0: must gain)
    force: bool = False
    holdout: float = 0.2
    min_rows: int = 200
    min_rows_per_model: int = 20
    min_ess_per_model: float = 10.0
    n_boot: int = 300
    seed: int = 0
    out: Path | None = None  # report folder (default: the new version's folder, or artifacts/reports)


@dataclass(frozen=True)
class TierEvaluation:
    """Off-policy evaluation of one tier on the held-out rows: the new router vs the reference (the active
    router, or before any the logging policy itself)."""

    tier: str
    lam: float
    new: PolicyValue
    reference: PolicyValue
    reference_name: str
    traffic_changing_model: float  # share of held-out requests the new router sends elsewhere (NaN: no active)
    model_mix: dict[str, float]  # share of held-out requests per model under the new router


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
            embedding_model=settings.embedder.model,
        )


def _active(settings: Settings, active_id: str | None, data_info: dict) -> RouterArtifact | None:
    if active_id is None:
        return None
    try:
        return load_artifact(
            Path(settings.artifacts_dir) / active_id, models=settings.models, embedder_model=settings.embedder.model
        )
    except ArtifactError as exc:
        data_info["active_unreadable"] = str(exc)
        return None


def evaluate(learner, hold: LoggedFeedback, tiers, active: RouterArtifact | None, opts: RetrainOptions) -> list[TierEvaluation]:
    """Per tier: DR/SNIPS value of the new router and of the reference on the held-out rows."""
    nuisance = learner.nuisance_
    q_hat, c_hat = nuisance.outcome_.predict(hold.X)
    p_hold = np.clip(nuisance.propensity_.observed(hold), 1e-3, 1.0) if hold.propensity is None else hold.propensity
    index = {m: i for i, m in enumerate(hold.model_names)}
    policy = learner.policy_.to_policy()
    rows = []
    for name, spec in tiers:
        kw = dict(
            logged=hold.action,
            quality=hold.quality,
            cost=hold.cost,
            propensity=p_hold,
            quality_hat=q_hat,
            cost_hat=c_hat,
            lam=spec.lam,
            n_boot=opts.n_boot,
            seed=opts.seed,
        )
        new_actions = policy.choose(hold.X, spec.lam)
        new = policy_value(new_actions, **kw)
        if active is not None:
            act_actions = np.array([index[active.model_names[a]] for a in active.policy.choose(hold.X, spec.lam)])
            ref, ref_name = policy_value(act_actions, **kw), f"active {active.version}"
            changed = float(np.mean(act_actions != new_actions))
        else:
            ref, ref_name = (
                on_policy_value(hold.quality, hold.cost, spec.lam, n_boot=opts.n_boot, seed=opts.seed),
                "logging policy",
            )
            changed = float("nan")
        mix = np.bincount(new_actions, minlength=hold.n_models) / len(new_actions)
        rows.append(
            TierEvaluation(name, spec.lam, new, ref, ref_name, changed, {m: float(v) for m, v in zip(hold.model_names, mix)})
        )
    return rows


def gate(rows: list[TierEvaluation], margin: float) -> list[str]:
    """The tiers on which the new router is worse than the reference by more than ``margin``."""
    return [
        f"{r.tier}: {100 * r.new.dr:.2f} vs {100 * r.reference.dr:.2f} ({r.reference_name})"
        for r in rows
        if r.new.dr < r.reference.dr - margin
    ]


def publish(settings: Settings, engine: Engine, learner, rows: list[TierEvaluation], data_info: dict) -> Path:
    """Write the versioned artifact, point ``ACTIVE`` at it and mark it active in the store."""
    from regret_gateway.store.repository import publish_version

    root = Path(settings.artifacts_dir)
    metrics = json.loads(json.dumps({"tiers": [asdict(r) for r in rows], "data": data_info}, default=float))  # plain JSON
    path = save_artifact(
        root,
        policy=learner.policy_.to_policy(),
        tiers={n: s.lam for n, s in settings.tiers_by_lambda()},
        embedder={"model": settings.embedder.model, "paper_template": settings.embedder.paper_template},
        metrics=metrics,
    )
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
        data_info = check_data(ts.logged, ts.skipped, opts)
    except RetrainRefused as exc:
        result = RetrainResult("refused", str(exc), active_before=active_id, data={"left_out": ts.skipped, "rows": ts.n_rows})
        _write_report(result, opts.out or root / "reports")
        return result
    logged = ts.logged
    fit_ix, hold_ix = _split(logged.n_samples, opts.holdout, opts.seed)
    tiers = settings.tiers_by_lambda()
    t1 = time.perf_counter()
    learner = fit_router(logged.subset(fit_ix), [spec.lam for _, spec in tiers], seed=opts.seed)
    timings["fit"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    active = _active(settings, active_id, data_info)
    rows = evaluate(learner, logged.subset(hold_ix), tiers, active, opts)
    timings["evaluate"] = time.perf_counter() - t2
    worse = gate(rows, opts.margin)
    if worse and not opts.force:
        reason = (
            f"the new router is worse by more than the margin ({opts.margin}) on: "
            + "; ".join(worse)
            + " -- the active router stays (use --force to publish anyway)"
        )
        result = RetrainResult("kept", reason, active_before=active_id, data=data_info, tiers=rows)
        timings["total"] = time.perf_counter() - t0
        result.seconds = timings
        _write_report(result, opts.out or root / "reports")
        return result
    path = publish(settings, engine, learner, rows, data_info)
    timings["total"] = time.perf_counter() - t0
    reason = (
        "forced"
        if worse
        else ("no tier is worse than the " + ("active router" if active else "logging policy") + f" by more than {opts.margin}")
    )
    result = RetrainResult(
        "published", reason, version=path.name, active_before=active_id, data=data_info, tiers=rows, seconds=timings
    )
    _write_report(result, opts.out or path)
    return result


def report_table(result: RetrainResult) -> str:
    """Markdown table per tier: estimated utility x100 (DR, 95% CI), quality, cost per 1k requests, mix."""
    lines = [
        "| tier | λ | router | utility x100 (DR, 95% CI) | SNIPS x100 | quality | $ per 1k req | ESS | model mix |",
        "|---|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for row in result.tiers:
        for label, v in (("new", row.new), (row.reference_name, row.reference)):
            mix = (
                ", ".join(f"{m} {100 * s:.0f}%" for m, s in sorted(row.model_mix.items(), key=lambda kv: -kv[1]) if s > 0)
                if label == "new"
                else ""
            )
            lines.append(
                f"| {row.tier} | {row.lam:g} | {label} | {100 * v.dr:.2f} [{100 * v.dr_ci[0]:.2f}, {100 * v.dr_ci[1]:.2f}] | "
                f"{100 * v.snips:.2f} | {v.quality:.3f} | {1000 * v.cost:.3f} | {v.ess:.0f} | {mix} |"
            )
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
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(len(tiers))
    for k, (key, label) in enumerate((("new", "new router"), ("reference", tiers[0].reference_name))):
        values = [getattr(t, key) for t in tiers]
        vals = np.array([100 * v.dr for v in values])
        lo = vals - np.array([100 * v.dr_ci[0] for v in values])
        hi = np.array([100 * v.dr_ci[1] for v in values]) - vals
        ax1.bar(x + (k - 0.5) * 0.38, vals, 0.38, yerr=[lo, hi], capsize=3, label=label)
    ax1.set_xticks(x, [f"{t.tier}\nλ={t.lam:g}" for t in tiers])
    ax1.set_ylabel("estimated utility x100 (DR, 95% CI)")
    ax1.set_title(f"retrain: {result.status}")
    ax1.legend(fontsize=8)
    models = list(tiers[0].model_mix)
    bottom = np.zeros(len(tiers))
    for m in models:
        share = np.array([t.model_mix[m] for t in tiers])
        ax2.bar(x, share, 0.6, bottom=bottom, label=m)
        bottom += share
    ax2.set_xticks(x, [t.tier for t in tiers])
    ax2.set_ylabel("share of held-out requests")
    ax2.set_title("model mix of the new router")
    ax2.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
