"""What ``retrain`` fits and how it chooses what each tier serves, apart from the store and the artifacts
folder (:mod:`regret_gateway.retrain` runs it on the gateway's logs; the offline bench's ``served`` row
on simulated ones).

* The production learner (:func:`production_learner`, :func:`fit_router`): exact logged propensities
  (XGBoost where rows were imported without one), outcome MLPs, DR scores, RM-Interval over the tier
  lambdas; full-batch up to 5,000 rows, mini-batches beyond (:func:`_train_config`).
* Cross-fitting (:func:`out_of_fold_fits`): one fit per fold, each on the other folds.
* The safe default (:mod:`regret_gateway.policy.regions`): per tier, the best constant model, except in
  the regions of prompt space whose out-of-fold DR scores prove another model better there.
* The choice (:func:`evaluate`): per tier, the learned candidates (:func:`learned_candidates`:
  RM-Interval, RM-Cluster, R&C), the safe default and what the tier serves now, each valued on the
  held-out rows; :func:`regret_gateway.ope.select` keeps the incumbent unless a candidate's gain is
  confident. The incumbent is the tier's active learned router if it has one, else the safe default
  (re-derived every retrain: it departs from the constant only where the logs prove it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from regret_gateway.artifacts import RouterArtifact
from regret_gateway.causal.estimators import HeldOut
from regret_gateway.causal.stats import folds_of, prompt_groups
from regret_gateway.context import SizeFeature
from regret_gateway.data import LoggedFeedback
from regret_gateway.ope import LoggedData, PolicyValue, Selection, select
from regret_gateway.policy.cluster import SharedCentroids
from regret_gateway.policy.regions import MAX_REGIONS, RegionChoice, choose_regions, fit_regions, region_policy
from regret_gateway.servable import Candidate, ConstantPolicy, PublishedRouter, ServablePolicy, ServedTier, unit_rows

FOLDS = 5  # retrain's number of folds up to TWO_FOLDS_FROM rows (RetrainOptions.folds: default_folds)
TWO_FOLDS_FROM = 60_000  # past this many rows retrain cross-fits with two folds (default_folds)
N_BOOT = 300  # bootstrap resamples of the gate's paired intervals (RetrainOptions.n_boot)


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
    changed: bool = True  # the published policy sends some logged request elsewhere than the tier's active one did
    regions_adopted: int = 0  # regions where the safe default departs from the constant (a proven gain)
    regions: int = 1  # regions of prompt space the safe default tested

    @property
    def new(self) -> PolicyValue:
        return self.values[self.served]

    @property
    def reference(self) -> PolicyValue:
        return self.values[self.incumbent]


FULL_BATCH_ROWS = 5_000  # a fit on more rows trains in mini-batches (:func:`_train_config`)


def _train_config(n: int, precision: str = "auto"):
    """Full-batch Adam at lr 1e-3 (the ``fast`` preset) with the paper's patience of 100 epochs up to 5,000
    rows, in float32; beyond, mini-batches of 1,024 for at most 40 epochs (patience 5): a fixed number of
    passes, so the time grows linearly with the rows, their matrix products in ``precision`` (``auto``:
    bfloat16 where the CPU multiplies it natively, :mod:`regret_gateway.nn.training`; ``retrain --precision``).

    Why patience 100 and not ``fast``'s 50: with a few hundred logged rows the validation share is a few
    dozen rows, and a network that has waited 50 full-batch steps without a better validation regret is
    stopped for good; on uniform logs of the generated world (360 and 720 rows, 5 seeds each) that cost
    the lambda=1000 tier 2-7 points in 3 of the 10 fits (1.4-1.5 on the mean over seeds), and patience 100
    gave them back (README)."""
    from regret_gateway.nn.training import TrainConfig

    if n <= FULL_BATCH_ROWS:
        return TrainConfig(patience=100)
    return TrainConfig(batch_size=1024, max_epochs=40, patience=5, precision=precision)


def default_folds(n_rows: int) -> int:
    """Retrain's number of folds for ``n_rows`` logged rows: five, and two past 60,000 rows. Five fits on
    4/5 of the rows cost four fits of every row; two fits on half of them cost one, and each still learns from
    more than 30,000 rows. On LLMRouter's and MMLU-Pro's dev slices at 81,000-85,000 logged rows, what retrain
    published from two folds was +0.20 and -0.34 points from what it published from five, less than its own
    seed moves it (docs/experiments/retrain-time.md). Every row is still evaluated out of fold, so the gate's
    intervals keep their width."""
    return FOLDS if n_rows <= TWO_FOLDS_FROM else 2


def _split(n: int, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rest, held): a seeded random ``share`` of the rows held out."""
    order = np.random.default_rng(seed).permutation(n)
    n_held = max(1, int(round(share * n)))
    return np.sort(order[n_held:]), np.sort(order[:n_held])


def production_learner(
    n_rows: int, tier_lams: list[float], *, imported: bool, seed: int = 0, outcome_train=None, outcome_options=None,
    precision: str = "auto",
):  # fmt: skip
    """The learner ``retrain`` publishes from: exact logged propensities (XGBoost where some rows were
    imported without one), outcome MLPs, DR scores, RM-Interval over the tier lambdas. Every network
    trains with :func:`_train_config`; ``outcome_train`` (a ``TrainConfig``) trains the outcome networks
    otherwise, and ``outcome_options`` (e.g. ``{"shared": True}``) are passed to the
    :class:`~regret_gateway.causal.outcome.OutcomeModel` (dev studies:
    docs/experiments/scripts/train_config_dev.py)."""
    from regret_gateway.causal.estimators import DoublyRobust, Nuisance
    from regret_gateway.causal.outcome import OutcomeModel
    from regret_gateway.causal.propensity import LoggedPropensity, PropensityModel
    from regret_gateway.policy.learner import Learner
    from regret_gateway.policy.rm_interval import RMInterval

    config = _train_config(n_rows, precision)
    nuisance = Nuisance(
        propensity=PropensityModel() if imported else LoggedPropensity(),
        outcome=OutcomeModel(train=config if outcome_train is None else outcome_train, **(outcome_options or {})),
        estimator=DoublyRobust(),
        random_state=seed,
    )
    return Learner(nuisance=nuisance, policy=RMInterval(tiers=sorted(tier_lams), train=config, random_state=seed))


def fit_router(logged: LoggedFeedback, tier_lams: list[float], *, seed: int = 0, precision: str = "auto"):
    """Fit the production learner on ``logged`` (1/8 of it held out for early stopping; its mini-batch fits'
    products in ``precision``). Returns the fitted :class:`~regret_gateway.policy.learner.Learner`."""
    train_ix, val_ix = _split(logged.n_samples, 0.125, seed + 1)  # validation: early stopping only
    tr, va = logged.subset(train_ix), logged.subset(val_ix)
    learner = production_learner(tr.n_samples, tier_lams, imported=bool(logged.imported.any()), seed=seed, precision=precision)
    return learner.fit(tr, va, sorted(tier_lams))


FIXED = "constant"  # the best constant model, the fixed choice every tier can fall back to
REGIONS = "regions"  # the safe regional policy: the constant, with proven regions departing
PRICED = "priced"  # the best constant with each request priced by its prompt's size (policy/priced.py)


@dataclass(frozen=True)
class OutOfFoldFits:
    """The fits of cross-fitting: ``learners[k]`` was fitted on every row of ``logged`` but ``folds[k]``;
    ``groups`` (n,) is each row's prompt (:func:`~regret_gateway.causal.stats.prompt_groups`), which the folds
    keep together."""

    logged: LoggedFeedback
    folds: list[np.ndarray]
    learners: list
    groups: np.ndarray

    @property
    def order(self) -> np.ndarray:
        """(n,) the rows in fold order: how the out-of-fold arrays of :func:`evaluate` are laid out."""
        return np.concatenate(self.folds)


def out_of_fold_fits(
    logged: LoggedFeedback, tier_lams: list[float], *, folds: int | None = None, every: bool = True, seed: int = 0,
    on_fit: Callable[[int, int, int], None] | None = None, precision: str = "auto",
) -> OutOfFoldFits:  # fmt: skip
    """One :func:`fit_router` per fold (at ``precision``), each on the other folds (``every=False``: the first fold only;
    ``folds=None``: :func:`default_folds` of the rows; ``on_fit(k, of, rows)`` is called as fit k starts). A
    prompt logged several times lies in one fold (:func:`~regret_gateway.causal.stats.folds_of`). The fits
    run one after another: on 2 cores, torch's two threads already keep both busy (fitting the folds in two
    one-thread processes instead measured 1.02-1.04 times as fast: docs/experiments/retrain-time.md)."""
    groups = prompt_groups(logged.X)
    folds = default_folds(logged.n_samples) if folds is None else folds
    parts = folds_of(logged.n_samples, folds, seed, groups)[: None if every else 1]
    everything = np.arange(logged.n_samples)
    learners = []
    for k, held in enumerate(parts):
        rest = np.setdiff1d(everything, held)
        if on_fit is not None:  # (this fit, of how many, on how many rows): retrain's progress lines
            on_fit(k + 1, len(parts), len(rest))
        learners.append(fit_router(logged.subset(rest), tier_lams, seed=seed, precision=precision))
    return OutOfFoldFits(logged, parts, learners, groups)


@dataclass(frozen=True)
class HeldOutRows:
    """The held-out rows of :func:`out_of_fold_fits` (in ``fits.order``): each fold scored by the fit that did
    not see it (``held``), the rows themselves (``logs``) and their off-policy evaluation data (``data``:
    logged, or for imported rows estimated, propensities, each fold's outcome predictions by its own fit,
    each row's logger and prompt, 0..G-1 over the held-out rows)."""

    held: list[HeldOut]
    logs: LoggedFeedback
    data: LoggedData


def held_out_rows(fits: OutOfFoldFits, loggers: np.ndarray | None) -> HeldOutRows:
    """The held-out rows of ``fits`` with ``loggers`` (n,) naming each row's logging policy (or None)."""
    held = [learner.nuisance_.held_out(fits.logged.subset(f)) for learner, f in zip(fits.learners, fits.folds)]
    order = fits.order
    hold = fits.logged.subset(order)
    q_hat, c_hat = np.concatenate([h.quality_hat for h in held]), np.concatenate([h.cost_hat for h in held])
    p_hold = np.concatenate([h.propensity for h in held])  # logged, or estimated for imported rows (floored there)
    strata = None if loggers is None else np.asarray(loggers)[order]
    groups = np.unique(fits.groups[order], return_inverse=True)[1].reshape(-1)
    data = LoggedData(hold.action, hold.quality_target, hold.cost, p_hold, q_hat, c_hat, strata=strata, groups=groups,
                      target_errors=hold.target_errors)  # fmt: skip
    return HeldOutRows(held, hold, data)


def learned_candidates(
    learner, model_names: tuple[str, ...], lams: list[float], centroids: dict[int, np.ndarray] | None = None
) -> tuple[dict[str, ServablePolicy], int]:
    """The routers one fit offers every tier: the RM routers (RM-Interval, the paper's; RM-Cluster, regret
    minimisation over embedding clusters) and R&C (the outcome models' argmax); and RM-Cluster's number of
    clusters (with one it is a constant model: the fixed choice, from fewer rows). ``centroids``: RM-Cluster's
    clusterings per K (:class:`~regret_gateway.policy.cluster.SharedCentroids`), else a k-means of the fit's rows."""
    from regret_gateway.policy.cluster import RMCluster

    cluster = RMCluster(random_state=learner.policy.random_state, centroids=centroids).fit(learner.data_, lams)
    policies = {
        "rm-interval": learner.policy_.to_policy(),
        "r-and-c": learner.nuisance_.outcome_.to_policy(model_names),
        "rm-cluster": cluster.to_policy(),
    }
    return policies, cluster.k_


def _serving(active: RouterArtifact | None, tier: str, model_names: tuple[str, ...]) -> tuple[Candidate, ServablePolicy] | None:
    """(candidate, policy) of what the active artifact serves tier ``tier``, if it holds that tier and routes
    over the same models."""
    served = None if active is None or active.model_names != model_names else active.router.tier(tier)
    return None if served is None else (served.candidate.of_version(active.version), served.policy)  # type: ignore[union-attr]


@dataclass(frozen=True)
class _Gated:
    """One tier's gate in :func:`evaluate`: its choice, the candidates (label -> (candidate, policy)) and their
    actions on the held-out rows, the incumbent, what the tier served before, and the safe default."""

    sel: Selection
    pool: dict[str, tuple[Candidate, ServablePolicy]]
    actions: dict[str, np.ndarray]
    incumbent: str
    current: tuple[Candidate, ServablePolicy] | None
    prior: tuple[Candidate, ServablePolicy] | None
    choice: RegionChoice
    safe: Candidate


def evaluate(
    fits: OutOfFoldFits,
    tiers,
    active: RouterArtifact | None,
    loggers: np.ndarray | None = None,
    *,
    margin: float = 0.0,
    force: bool = False,
    n_boot: int = N_BOOT,
    seed: int = 0,
    regions: bool = True,
    held: HeldOutRows | None = None,
    size: SizeFeature | None = None,
) -> tuple[list[TierEvaluation], PublishedRouter]:
    """Per tier: every candidate's DR/SNIPS value on the held-out folds' rows (every row when cross-fitted)
    and the choice of what to serve (:func:`regret_gateway.ope.select`). A learned candidate's choice on
    fold k and the outcome models' predictions there come from ``fits.learners[k]``; the best constant
    model is chosen on the DR scores of every row -- out of fold where cross-fitted, else the held-out
    fold's and the fit's own -- (the most data for the fixed choice; that the evaluation rows chose it
    favours it in the comparison, which errs on the safe side). The safe default departs from it only in
    the regions the held-out rows' DR scores prove (:mod:`regret_gateway.policy.regions`). ``loggers``
    (n,) names the policy that logged each row (tier and router version, :func:`regret_gateway.store.training_set.loggers_of`): each
    logger's DR correction is then weighted by what it knows about a candidate's choices
    (:mod:`regret_gateway.ope`); the bootstrap resamples prompts (rows with one embedding). Returns the
    evaluations and the published router they describe (each tier by name) -- the learned candidates of the first fold's fit
    -- with its R&C outcome networks as the utility estimator (exploration reads it, whatever a tier
    serves). ``held``: the held-out rows where the caller has them already (:func:`held_out_rows` with the
    same ``loggers``). ``size``: the size feature the rows carry last, if they do: the priced router
    (:mod:`regret_gateway.policy.priced`: the best constant with each request priced by its prompt's size) is
    then a candidate too, built like the best constant from every row's DR scores."""
    order, names = fits.order, fits.logged.model_names
    parts = [fits.logged.subset(f) for f in fits.folds]
    rows_out = held or held_out_rows(fits, loggers)
    hold, data = rows_out.logs, rows_out.data
    oof = rows_out.held[0].scores.concat(*(h.scores for h in rows_out.held[1:]))
    scores, scored = oof, [hold]  # the rows the fixed choice reads: their DR scores, and the rows themselves
    if len(parts) == 1:  # one fold held out: the fixed choice reads the fit's own rows too (in-sample scores)
        scores = scores.concat(fits.learners[0].data_.scores, fits.learners[0].data_.val_scores)
        scored += fits.learners[0].data_.observed("the fixed choice")
    groups = data.groups
    assert groups is not None
    space = fit_regions(hold.X, groups, seed=seed, max_regions=MAX_REGIONS if regions else 1)
    fold_rows = np.split(np.arange(len(order)), np.cumsum([len(f) for f in fits.folds])[:-1])  # each fold's rows in ``hold``
    lams = [spec.lam for _, spec in tiers]
    shared = SharedCentroids(unit_rows(fits.logged.X), seed=fits.learners[0].policy.random_state)  # one k-means per K
    learned = [learned_candidates(learner, names, lams, shared) for learner in fits.learners]
    published, k_clusters = learned[0]
    labels = [label for label in published if label != "rm-cluster" or k_clusters > 1]
    priced = None
    if size is not None:
        from regret_gateway.policy.priced import fit_priced

        priced = fit_priced(names, scores.quality, scores.cost, np.concatenate([r.X for r in scored]),
                            np.concatenate([r.action for r in scored]), np.concatenate([r.cost for r in scored]), size)  # fmt: skip
    # every learned candidate's choices at every tier's lambda, each fold's by the fit that did not see it: one
    # pass per policy for every lambda (the outcome networks' forward pass, the nearest centroids)
    out_of_fold = {
        label: np.concatenate([fold[label].choices(part.X, lams) for (fold, _), part in zip(learned, parts)], axis=1)
        for label in labels
    }
    gated: list[_Gated] = []  # per tier: the gate's choice among its candidates
    for i, (name, spec) in enumerate(tiers):
        best = scores.best_constant(spec.lam)
        prior = _serving(active, name, names)
        current = None if prior is None or prior[0].safe else prior  # a safe default is re-derived, not kept
        # the baseline is sticky: a tier serving a safe default keeps its constant (another constant must pass
        # the gate as a challenger); its regions are re-derived from these logs
        b = names.index(prior[0].model) if prior is not None and current is None and prior[0].model is not None else best
        choice = choose_regions(
            oof.quality, oof.cost, hold.action, space, groups, b, spec.lam, propensity=data.propensity,
            folds=fold_rows if len(parts) > 1 else None, aggregate=True,
        )  # fmt: skip
        safe = Candidate(REGIONS if choice.n_adopted else FIXED, names[b])
        safe_policy = region_policy(names, space, choice) if choice.n_adopted else ConstantPolicy(names, names[b])
        # every candidate of this tier, by the label the gate and the report name it: (what it is, its policy)
        pool: dict[str, tuple[Candidate, ServablePolicy]] = {label: (Candidate(label), published[label]) for label in labels}
        pool[safe.label] = (safe, safe_policy)
        if best != b:
            challenger = Candidate(FIXED, names[best])
            pool[challenger.label] = (challenger, ConstantPolicy(names, names[best]))
        if priced is not None:
            pool[PRICED] = (Candidate(PRICED), priced)
        actions = {label: out_of_fold[label][i] for label in labels}
        for label, (_, policy) in pool.items():
            if label not in actions:
                actions[label] = policy.choose(hold.X, spec.lam)
        incumbent = safe.label
        if current is not None:
            incumbent = current[0].label
            pool[incumbent] = current
            actions[incumbent] = current[1].choose(hold.X, spec.lam)
        sel = select(data, actions, incumbent, spec.lam, required=margin, force=force, n_boot=n_boot, seed=seed)
        gated.append(_Gated(sel, pool, actions, incumbent, current, prior, choice, safe))
    # what the published policy does with these requests: a learned candidate's actions above are its fold
    # fits' (out of fold), so a served one is asked again, once for the tiers that serve it; the safe
    # default's and the incumbent's are their published choices already
    serving = {label: [i for i, g in enumerate(gated) if g.sel.served == label] for label in labels}
    published_choices = {
        label: dict(zip(ix, published[label].choices(hold.X, [lams[i] for i in ix]))) for label, ix in serving.items() if ix
    }
    rows, served_tiers = [], {}
    for i, ((name, spec), g) in enumerate(zip(tiers, gated)):
        sel = g.sel
        chosen, chosen_policy = g.pool[sel.served]
        served = published_choices[sel.served][i] if sel.served in labels else g.actions[sel.served]
        mix = np.bincount(served, minlength=hold.n_models) / len(served)
        changing = float(np.mean(served != g.actions[g.incumbent]))
        changed = sel.served != g.incumbent if g.current is not None else (
            g.prior is None or not np.array_equal(g.prior[1].choose(hold.X, spec.lam), served))  # fmt: skip
        reason = sel.reason() + ("; " + g.choice.describe(names) if sel.served == g.safe.label else "")
        rows.append(
            TierEvaluation(name, spec.lam, sel.served, g.incumbent, reason, sel.values, sel.gain, sel.gain_ci, changing,
                           {m: float(v) for m, v in zip(names, mix)}, changed, g.choice.n_adopted, space.n_regions)
        )  # fmt: skip
        served_tiers[name] = ServedTier(spec.lam, chosen.of_version(None), chosen_policy)  # published in the new version
    estimator = published["r-and-c"]  # this retrain's outcome networks: every tier's utility estimates for exploration
    return rows, PublishedRouter(served_tiers, estimator)
