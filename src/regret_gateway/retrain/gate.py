"""How ``retrain`` chooses what each tier serves (steps 4-5), apart from the store and the artifacts folder.

* The safe default (:mod:`regret_gateway.policy.regions`): per tier, the best constant model, except in
  the regions of prompt space whose out-of-fold DR scores prove another model better there.
* The choice (:func:`evaluate`): per tier, the learned candidates (:func:`learned_candidates`:
  RM-Interval, RM-Cluster, R&C), the safe default and what the tier serves now (the incumbent, passed in by
  tier name), each valued on the held-out rows; :func:`regret_gateway.causal.selection.select` keeps the incumbent
  unless a candidate's gain is confident. The incumbent is the tier's active learned router if it has one,
  else the safe default (re-derived every retrain: it departs from the constant only where the logs prove it).
* Where exploration spends (:func:`contenders`): per tier, the models the logs could not yet show to be
  worse, as its constant, than what it serves; published with the tier (``ServedTier.contenders``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from regret_gateway.causal.estimators import CounterfactualScores
from regret_gateway.causal.ope import N_BOOT, LoggedData, PolicyValue
from regret_gateway.causal.pooling import pooled_scores
from regret_gateway.causal.selection import Selection, select
from regret_gateway.confidence import ALPHA, family_alpha
from regret_gateway.context import ContextCode, SizeFeature
from regret_gateway.data import LoggedFeedback
from regret_gateway.policy.cluster import SharedCentroids
from regret_gateway.policy.regions import (
    MAX_REGIONS,
    RegionChoice,
    Regions,
    choose_regions,
    fit_regions,
    key_regions,
    region_policy,
)
from regret_gateway.retrain.fits import HeldOutRows, OutOfFoldFits, held_out_rows
from regret_gateway.servable import (
    Candidate,
    CandidateKind,
    ConstantPolicy,
    PublishedRouter,
    ServablePolicy,
    ServedTier,
    unit_rows,
)


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
    candidates: dict[str, Candidate] = field(default_factory=dict)  # label -> what it is (of ``values``' labels)
    contenders: tuple[str, ...] = ()  # models not yet shown worse, as a constant, than what it serves: it explores the first
    regions_gain: float = 0.0  # what the adopted regions claim over the constant, per request (RegionChoice.total)
    regions_lower: float = float("-inf")  # its lower confidence bound (-inf: no region departs)

    @property
    def new(self) -> PolicyValue:
        return self.values[self.served]

    @property
    def reference(self) -> PolicyValue:
        return self.values[self.incumbent]


def contenders(data: LoggedData, served: np.ndarray, lam: float, names: tuple[str, ...], *, n_boot: int = N_BOOT,
               seed: int = 0, alpha: float = ALPHA) -> tuple[str, ...]:  # fmt: skip
    """The models the held-out logs ``data`` cannot show to be worse, as a constant, than the choices
    ``served`` (n,): a model is dismissed where the upper end of its paired gain's interval over the served
    choices (the gate's estimator, each logger weighted by what it knows; one of T - 1 comparisons) is below
    0; one ``served`` picks on every row is served, not contending. Ordered by that upper end, highest
    first: the tier's exploration spends on the first (gateway/exploration.py) until the logs settle it."""
    n = len(served)
    rivals = {name: np.full(n, t) for t, name in enumerate(names) if not np.all(served == t)}
    family = family_alpha(alpha, max(1, len(names) - 1))
    gains = data.gains(rivals, served, lam, n_boot=n_boot, alpha=family, seed=seed)
    upper = {name: gains[name][1][1] for name in rivals}
    return tuple(sorted((name for name in rivals if upper[name] > 0), key=lambda name: (-upper[name], name)))


def learned_candidates(
    learner, model_names: tuple[str, ...], lams: list[float], centroids: dict[int, np.ndarray] | None = None
) -> tuple[dict[str, ServablePolicy], int]:
    """The routers one fit offers every tier: the RM routers (RM-Interval, the paper's; RM-Cluster, regret
    minimisation over embedding clusters) and R&C (the outcome models' argmax); and RM-Cluster's number of
    clusters (with one it is a constant model: the fixed choice, from fewer rows). ``centroids``: RM-Cluster's
    clusterings per K (:class:`~regret_gateway.policy.cluster.SharedCentroids`), else a k-means of the fit's rows."""
    from regret_gateway.policy.cluster import RMCluster

    cluster = RMCluster(random_state=learner.policy.random_state, centroids=centroids).fit(learner.data_, lams)
    policies: dict[str, ServablePolicy] = {  # keyed by their CandidateKind
        CandidateKind.RM_INTERVAL: learner.policy_.to_policy(),
        CandidateKind.R_AND_C: learner.nuisance_.outcome_.to_policy(model_names),
        CandidateKind.RM_CLUSTER: cluster.to_policy(),
    }
    return policies, cluster.k_


@dataclass(frozen=True)
class _Evidence:
    """What every tier's gate in :func:`evaluate` reads: the model names, the DR scores the fixed choice reads,
    whether one fold was held out (``single``), the held-out rows and their evaluation data, their prompts,
    the regions and each region's pooled scores, each fold's rows, the learned candidates' labels and the
    published fits, the priced router (or None) and each learned candidate's out-of-fold choices."""

    names: tuple[str, ...]
    scores: CounterfactualScores
    single: bool
    hold: LoggedFeedback
    data: LoggedData
    groups: np.ndarray
    space: Regions
    by_region: CounterfactualScores
    fold_rows: list[np.ndarray]
    labels: list[str]
    published: dict
    priced: ServablePolicy | None
    out_of_fold: dict[str, np.ndarray]


@dataclass(frozen=True)
class _Gated:
    """One tier's gate in :func:`evaluate`: its choice, the candidates (label -> (candidate, policy)) and their
    actions on the held-out rows, the incumbent, what the tier served before, the safe default, and the
    tier's own rows with their evaluation data."""

    sel: Selection
    pool: dict[str, tuple[Candidate, ServablePolicy]]
    actions: dict[str, np.ndarray]
    incumbent: str
    current: tuple[Candidate, ServablePolicy] | None
    prior: tuple[Candidate, ServablePolicy] | None
    choice: RegionChoice
    safe: Candidate
    own: np.ndarray | None  # (n,) bool: the held-out rows of the apps the tier's own requests came from (None: all)
    on: LoggedData  # those rows' evaluation data, which the gate and the contenders read


def _evidence(
    fits: OutOfFoldFits, lams: list[float], loggers: np.ndarray | None, *, held: HeldOutRows | None,
    size: SizeFeature | None, code: ContextCode | None, regions: bool, seed: int,
) -> _Evidence:  # fmt: skip
    """What every tier's gate reads (:class:`_Evidence`), from the fits and their held-out rows (as
    :func:`evaluate` describes: the fixed choice's scores, the regions, the learned candidates' choices)."""
    order, names = fits.order, fits.logged.model_names
    parts = [fits.logged.subset(f) for f in fits.folds]
    rows_out = held or held_out_rows(fits, loggers)
    hold, data = rows_out.logs, rows_out.data
    # every held-out row's DR scores, each logger's correction weighted by what it knows of each model (the
    # gate's estimator spread over rows): the best constant and the regions read them
    oof = pooled_scores(data, clip=rows_out.held[0].scores.clip)
    scores, scored = oof, [hold]  # the rows the fixed choice reads: their DR scores, and the rows themselves
    if len(parts) == 1:  # one fold held out: the fixed choice reads the fit's own rows too (in-sample scores)
        scores = scores.concat(fits.learners[0].data_.scores, fits.learners[0].data_.val_scores)
        scored += fits.learners[0].data_.observed("the fixed choice")
    groups = data.groups
    assert groups is not None
    if code is not None and regions:
        end = hold.X.shape[1] - (size is not None)
        space = key_regions(hold.X, groups, slice(end - code.dim, end))
    else:
        space = fit_regions(hold.X, groups, seed=seed, max_regions=MAX_REGIONS if regions else 1)
    by_region = pooled_scores(data, clip=oof.clip, blocks=space.region)  # each region's loggers pooled on its own rows
    fold_rows = np.split(np.arange(len(order)), np.cumsum([len(f) for f in fits.folds])[:-1])  # each fold's rows in ``hold``
    shared = SharedCentroids(unit_rows(fits.logged.X), seed=fits.learners[0].policy.random_state)  # one k-means per K
    learned = [learned_candidates(learner, names, lams, shared) for learner in fits.learners]
    published, k_clusters = learned[0]
    labels = [label for label in published if label != CandidateKind.RM_CLUSTER or k_clusters > 1]
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
    return _Evidence(names, scores, len(parts) == 1, hold, data, groups, space, by_region, fold_rows, labels, published,
                     priced, out_of_fold)  # fmt: skip


def _gate_tier(
    ev: _Evidence, i: int, spec, own: np.ndarray | None, served_now: ServedTier | None, *, margin: float,
    force: bool, n_boot: int, seed: int,
) -> _Gated:  # fmt: skip
    """Tier ``i``'s gate in :func:`evaluate`: its baseline and safe default, its candidates and their actions on
    the held-out rows, and the choice among them (``own``: the tier's own rows, None: every row)."""
    names, hold, data = ev.names, ev.hold, ev.data
    best = (ev.scores if own is None or ev.single else ev.scores.subset(own)).best_constant(spec.lam)
    prior = None if served_now is None else (served_now.candidate, served_now.policy)
    current = None if prior is None or prior[0].safe else prior  # a safe default is re-derived, not kept
    # the baseline is sticky: a tier serving a safe default keeps its constant (another constant must pass
    # the gate as a challenger); its regions are re-derived from these logs
    b = names.index(prior[0].model) if prior is not None and current is None and prior[0].model is not None else best
    choice = choose_regions(
        ev.by_region.quality, ev.by_region.cost, hold.action, ev.space, ev.groups, b, spec.lam, propensity=data.propensity,
        folds=None if ev.single else ev.fold_rows, aggregate=True, population=own,
    )  # fmt: skip
    safe = Candidate(CandidateKind.REGIONS if choice.n_adopted else CandidateKind.CONSTANT, names[b])
    safe_policy = region_policy(names, ev.space, choice) if choice.n_adopted else ConstantPolicy(names, names[b])
    # every candidate of this tier, by the label the gate and the report name it: (what it is, its policy)
    pool: dict[str, tuple[Candidate, ServablePolicy]] = {
        label: (Candidate(CandidateKind(label)), ev.published[label]) for label in ev.labels
    }
    pool[safe.label] = (safe, safe_policy)
    if best != b:
        challenger = Candidate(CandidateKind.CONSTANT, names[best])
        pool[challenger.label] = (challenger, ConstantPolicy(names, names[best]))
    if ev.priced is not None:
        pool[CandidateKind.PRICED] = (Candidate(CandidateKind.PRICED), ev.priced)
    actions = {label: ev.out_of_fold[label][i] for label in ev.labels}
    for label, (_, policy) in pool.items():
        if label not in actions:
            actions[label] = policy.choose(hold.X, spec.lam)
    incumbent = safe.label
    if current is not None:
        incumbent = current[0].label
        pool[incumbent] = current
        actions[incumbent] = current[1].choose(hold.X, spec.lam)
    on, acts = (data, actions) if own is None else (data.subset(own), {k: a[own] for k, a in actions.items()})
    sel = select(on, acts, incumbent, spec.lam, required=margin, force=force, n_boot=n_boot, seed=seed)
    return _Gated(sel, pool, actions, incumbent, current, prior, choice, safe, own, on)


def _tier_row(
    ev: _Evidence, i: int, name: str, spec, g: _Gated, published_choices: dict, *, n_boot: int, seed: int
) -> tuple[TierEvaluation, ServedTier]:  # fmt: skip
    """Tier ``i``'s evaluation for the report and what the new version serves it: the served policy's choices
    on the held-out rows, its model mix, what changed, its contenders and the reason in words."""
    names, hold = ev.names, ev.hold
    sel = g.sel
    chosen, chosen_policy = g.pool[sel.served]
    served = published_choices[sel.served][i] if sel.served in ev.labels else g.actions[sel.served]
    mix = np.bincount(served, minlength=hold.n_models) / len(served)
    changing = float(np.mean(served != g.actions[g.incumbent]))
    changed = sel.served != g.incumbent if g.current is not None else (
        g.prior is None or not np.array_equal(g.prior[1].choose(hold.X, spec.lam), served))  # fmt: skip
    rivals = contenders(g.on, served if g.own is None else served[g.own], spec.lam, names, n_boot=n_boot, seed=seed)
    reason = sel.reason() + ("; " + g.choice.describe(names) if sel.served == g.safe.label else "")
    if rivals:
        rest = f", then {', '.join(rivals[1:])}" if len(rivals) > 1 else ""
        reason += f"; explores {rivals[0]}{rest} (not yet shown worse as a constant, the most room to gain first)"
    row = TierEvaluation(name, spec.lam, sel.served, g.incumbent, reason, sel.values, sel.gain, sel.gain_ci, changing,
                         {m: float(v) for m, v in zip(names, mix)}, changed, g.choice.n_adopted, ev.space.n_regions,
                         {label: g.pool[label][0] for label in sel.values}, rivals, g.choice.total,
                         g.choice.total_lower)  # fmt: skip
    return row, ServedTier(spec.lam, chosen.of_version(None), chosen_policy, rivals)  # published in the new version


def evaluate(
    fits: OutOfFoldFits,
    tiers,
    incumbents: Mapping[str, ServedTier] | None = None,
    loggers: np.ndarray | None = None,
    *,
    margin: float = 0.0,
    force: bool = False,
    n_boot: int = N_BOOT,
    seed: int = 0,
    regions: bool = True,
    held: HeldOutRows | None = None,
    size: SizeFeature | None = None,
    code: ContextCode | None = None,
    populations: Mapping[str, np.ndarray] | None = None,
) -> tuple[list[TierEvaluation], PublishedRouter]:
    """Per tier: every candidate's DR/SNIPS value on the held-out folds' rows (every row when cross-fitted)
    and the choice of what to serve (:func:`regret_gateway.causal.selection.select`). A learned candidate's choice on
    fold k and the outcome models' predictions there come from ``fits.learners[k]``; the best constant
    model is chosen on the DR scores of every row -- out of fold where cross-fitted, else the held-out
    fold's and the fit's own -- (the most data for the fixed choice; that the evaluation rows chose it
    favours it in the comparison, which errs on the safe side). The safe default departs from it only in
    the regions the held-out rows' DR scores prove (:mod:`regret_gateway.policy.regions`). ``loggers``
    (n,) names the policy that logged each row (tier and router version, :func:`regret_gateway.store.loggers.loggers_of`): each
    logger's DR correction is then weighted by what it knows about a candidate's choices
    (:mod:`regret_gateway.causal.ope`); the bootstrap resamples prompts (rows with one embedding). ``incumbents``: what each tier serves now, by tier
    name, its candidate carrying its version (:func:`regret_gateway.retrain.publish.serving_now`); a tier it
    lacks is a new one, whose incumbent is its safe default. Returns the
    evaluations and the published router they describe (each tier by name) -- the learned candidates of the first fold's fit
    -- with its R&C outcome networks as the utility estimator (exploration reads it, whatever a tier
    serves). ``held``: the held-out rows where the caller has them already (:func:`held_out_rows` with the
    same ``loggers``). ``size``: the size feature the rows carry last, if they do: the priced router
    (:mod:`regret_gateway.policy.priced`: the best constant with each request priced by its prompt's size) is
    then a candidate too, built like the best constant from every row's DR scores. ``code``: the context
    code the rows carry after the embedding (before the size feature), if they do: the safe default's
    regions are then its keys (:func:`regret_gateway.policy.regions.key_regions`). ``populations``: per tier
    name, (n,) bool over the held-out rows (in ``fits.order``) -- the requests of the apps that tier's own
    came from (:meth:`regret_gateway.trainset.window.TrainingSet.populations`): its best constant and its
    gate read those rows only (a tier without one: every row)."""
    lams = [spec.lam for _, spec in tiers]
    ev = _evidence(fits, lams, loggers, held=held, size=size, code=code, regions=regions, seed=seed)
    hold, labels, published = ev.hold, ev.labels, ev.published
    gated: list[_Gated] = []  # per tier: the gate's choice among its candidates
    for i, (name, spec) in enumerate(tiers):
        own = None if populations is None or name not in populations or populations[name].all() else populations[name]
        gated.append(_gate_tier(ev, i, spec, own, (incumbents or {}).get(name), margin=margin, force=force,
                                n_boot=n_boot, seed=seed))  # fmt: skip
    # what the published policy does with these requests: a learned candidate's actions above are its fold
    # fits' (out of fold), so a served one is asked again, once for the tiers that serve it; the safe
    # default's and the incumbent's are their published choices already
    serving = {label: [i for i, g in enumerate(gated) if g.sel.served == label] for label in labels}
    published_choices = {
        label: dict(zip(ix, published[label].choices(hold.X, [lams[i] for i in ix]))) for label, ix in serving.items() if ix
    }
    rows, served_tiers = [], {}
    for i, ((name, spec), g) in enumerate(zip(tiers, gated)):
        row, served_tiers[name] = _tier_row(ev, i, name, spec, g, published_choices, n_boot=n_boot, seed=seed)
        rows.append(row)
    # this retrain's outcome networks: every tier's utility estimates for exploration
    estimator = published[CandidateKind.R_AND_C]
    return rows, PublishedRouter(served_tiers, estimator)
