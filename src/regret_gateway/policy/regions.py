"""Safe policy improvement region by region: the tier's best constant model, except in the regions of
prompt space whose logs prove that another model is better there (SPIBB's idea -- Laroche, Trichelair and
Tachet des Combes, 2019: depart from the baseline only where the data is sufficient -- with the proof a
confidence bound).

* Regions: spherical k-means of the logged prompts' unit embeddings (each distinct prompt once), one
  region per ``rows_per_region`` logged rows (2,400) and at least ``min_prompts_per_region`` distinct
  prompts each (800; a prompt logged again is not more evidence), at most ``max_regions``: the more logs,
  the finer the regions. Both chosen on dev slices at one, three and ten logged draws per prompt
  (docs/experiments/learning-curve.md). The regions read no outcome, so the same rows may test them.
* Evidence: every logged row's out-of-fold DR scores Gamma_i(t) of quality and cost (every tier's rows: a
  model's quality and cost do not depend on the tier that logged it, and each row carries its own exact
  propensity), each logger's correction weighted by what it knows of the model
  (:mod:`regret_gateway.causal.pooling`: the rows of routers that explored a model at a tiny propensity
  would otherwise carry the outcome model's guess of it uncorrected). In region r, the gain of model m over the baseline b at lambda is the mean over the
  region's rows of d_i = Gamma_i(m) - Gamma_i(b) (utility A - lambda C, unclipped).
* Challengers, cross-fitted (retrain): for the rows of each fold, each region's challenger is the model
  with the best mean gain on the other folds' rows of the region, so the rows that test a challenger did
  not choose it; what is tested is the folds' proposals, each on the rows that did not make it. Which
  regions are tested reads no outcome (prompts and effective rows only): a rule that tested a region only
  where every fold proposed the same model chose its regions with the rows that then tested them, and
  departed in 14-24% of simulated worlds where every challenger was worse than the baseline
  (docs/experiments/chat-traffic.md). A departing region serves the model all its rows propose (the
  folds' proposals are that procedure on four fifths of the rows). (Without folds: every model,
  Bonferroni over the T - 1.)
* Test: one-sided z tests, standard errors clustered by prompt (rows of one prompt count as one draw).
  First the whole proposal -- every row of a tested region under its fold's challenger, the others under
  the baseline -- against the baseline at ``alpha``: if it gains, every tested region whose challengers
  gained on its rows departs. Else region by
  region, Holm's step-down at ``alpha``. A region is tested only with at least ``min_prompts`` prompts
  and ``min_matched`` rows that logged its challenger and as many that logged the baseline, and only where
  both were logged there with an effective sample size of at least ``min_ess`` (Kish's, of the importance
  weights 1/p, the rows of one prompt summed: SPIBB's count threshold in effective rows). Below it a few
  rows logged at tiny propensities decide the mean, and the z test's normal approximation fails: a
  closed-loop replay (IGW exploration, weights up to 640) adopted a region on an ESS of 32 whose estimated
  +16 points cost 5 on new prompts (docs/experiments/learning-curve.md). Either way, with probability about
  1 - alpha, the policy does not lose to the baseline.
* Claim: what departing gains (``total``) and its one-sided bound (``total_lower``), the bound given that
  the test passed (:func:`~regret_gateway.confidence.selective_lower`): the same rows decide that a claim
  is made and what it says, and the plain bound of a claim that just passed holds less often than its level.
* The policy (:class:`~regret_gateway.servable.RegionPolicy`): nearest centroid, then the region's model.

Where the router reads a context key (an app, a team, a task: :class:`~regret_gateway.context.ContextCode`),
the regions are the keys (:func:`key_regions`): one region per key with at least ``min_prompts`` logged
prompts, reached only by that key (a new key is served the baseline). Keys are many and each gets few
rows, so the evidence is shared: the gain a fold proposes for a key and model is that key's mean shrunk
toward the model's mean over the keys by how much evidence the key has (empirical Bayes: James and Stein's
estimator with the spread between keys estimated from the keys themselves, :func:`shrunk_means`), and a
key joins the whole proposal's test with an effective sample size of ``MIN_KEY_ESS`` (10: the whole
proposal's rows are many; chosen on dev slices, docs/experiments/chat-traffic.md); a key is tested alone,
where the whole proposal fails, only with ``min_ess``. The test, and
so the guarantee, is the same: what the other folds propose is tested on rows that did not propose it.
Where two models are close in a key the folds propose one or the other, and both proposals are tested.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from regret_gateway.causal.stats import effective_sample_size
from regret_gateway.confidence import ALPHA, holm, holm_levels, p_value, selective_lower, z_critical
from regret_gateway.policy.cluster import spherical_kmeans
from regret_gateway.servable import RegionPolicy, nearest_centroid, unit_rows

ROWS_PER_REGION = 2_400
MIN_PROMPTS_PER_REGION = 800
MAX_REGIONS = 32
MIN_PROMPTS = 30
MIN_MATCHED = 10
MIN_ESS = 100.0  # effective logged rows of a region's challenger and of its baseline (module doc)
MIN_KEY_ESS = 10.0  # the same, for a key's region to join the whole proposal's test (module doc; dev slices: chat-traffic.md)


@dataclass(frozen=True)
class Regions:
    """The partition of prompt space the tiers test: ``centroids`` (R, d) and each row's ``region`` (n,).
    With ``reach`` (the regions of context keys): a row scoring below it against every unit centroid is in
    no region (``region`` -1) and is served the baseline."""

    centroids: np.ndarray
    region: np.ndarray
    reach: float | None = None

    @property
    def n_regions(self) -> int:
        return len(self.centroids)

    @property
    def keyed(self) -> bool:
        return self.reach is not None


def fit_regions(
    X: np.ndarray,
    groups: np.ndarray,
    *,
    rows_per_region: int = ROWS_PER_REGION,
    min_prompts_per_region: int = MIN_PROMPTS_PER_REGION,
    max_regions: int = MAX_REGIONS,
    seed: int = 0,
) -> Regions:
    """k-means regions of the distinct prompts of ``X`` (n, d) (``groups`` (n,): rows of one prompt)."""
    n_groups = int(groups.max()) + 1
    first = np.full(n_groups, -1)
    first[groups[::-1]] = np.arange(len(groups))[::-1]  # one row per prompt
    Z = unit_rows(np.asarray(X[first], dtype=np.float32))
    k = int(np.clip(min(len(X) // rows_per_region, n_groups // min_prompts_per_region), 1, max_regions))
    centroids = (spherical_kmeans(Z, k, seed=seed) if k > 1 else unit_rows(Z.mean(0, keepdims=True))).astype(np.float32)
    return Regions(centroids, nearest_centroid(np.asarray(X, dtype=np.float32), centroids))


def key_regions(X: np.ndarray, groups: np.ndarray, block: slice, *, min_prompts: int = MIN_PROMPTS) -> Regions:
    """One region per context key of the rows of ``X`` (n, d) -- the key's code in the columns ``block``
    (:class:`~regret_gateway.context.ContextCode`) -- with at least ``min_prompts`` distinct prompts
    (``groups`` (n,)); the other keys' rows are in no region. A centroid is the key's code (zero
    elsewhere), so a row's score against it is its code's norm for its own key and less for any other:
    ``reach`` just under that norm admits only the key itself."""
    Z = np.round(np.asarray(X[:, block], dtype=np.float64), 5)
    keys, key_of = np.unique(Z, axis=0, return_inverse=True)
    key_of = key_of.reshape(-1)
    prompts = np.array([len(np.unique(groups[key_of == k])) for k in range(len(keys))])
    kept = np.flatnonzero(prompts >= min_prompts)
    norms = np.linalg.norm(keys[kept], axis=1)
    if not len(kept) or norms.min() <= 0:
        return Regions(np.zeros((1, X.shape[1]), dtype=np.float32), np.full(len(X), -1), reach=np.inf)
    centroids = np.zeros((len(kept), X.shape[1]), dtype=np.float32)
    centroids[:, block] = keys[kept]
    index = np.full(len(keys), -1)
    index[kept] = np.arange(len(kept))
    return Regions(unit_rows(centroids), index[key_of], reach=float(0.99 * norms.min()))


@dataclass(frozen=True)
class RegionChoice:
    """One tier's regional policy: per region the model served (the baseline where nothing is proven),
    whether it departs, its estimated gain over the baseline and the gain's lower confidence bound (x1,
    utility per request), and each region's share of the logged rows; ``total`` and ``total_lower``: what
    departing claims over the baseline on the whole traffic, per request -- the whole proposal's gain and
    its one-sided bound where that test adopted the regions, else the adopted regions' gains and bounds
    weighted by their shares (each bound at its family level: all hold together at 95%) -- 0 and -inf
    where no region departs."""

    baseline: int
    models: np.ndarray
    adopted: np.ndarray
    gain: np.ndarray
    lower: np.ndarray
    share: np.ndarray
    total: float = 0.0
    total_lower: float = float("-inf")

    @property
    def n_adopted(self) -> int:
        return int(self.adopted.sum())

    @property
    def adopted_share(self) -> float:
        return float(self.share[self.adopted].sum())

    def describe(self, model_names: tuple[str, ...]) -> str:
        base = model_names[self.baseline]
        if not self.n_adopted:
            return f"no region proves a gain over {base} ({len(self.models)} tested)"
        return (
            f"departs from {base} in {self.n_adopted} of {len(self.models)} regions "
            f"({100 * self.adopted_share:.0f}% of the logged requests), where the logs prove a gain"
        )


def clustered_se(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The standard error of the mean of ``values`` (n,) or of each column of (n, T), clustered by prompt
    (``groups`` (n,) in 0..G-1): sqrt(G / (G - 1) * sum_g (sum_{i in g} (v_i - mean))^2) / n."""
    v = values.reshape(len(values), -1)
    G = int(groups.max()) + 1
    sums = np.stack([np.bincount(groups, v[:, t] - v[:, t].mean(), minlength=G) for t in range(v.shape[1])], axis=1)
    se = np.sqrt((sums**2).sum(0) * G / max(G - 1, 1)) / len(v)
    return se if values.ndim == 2 else se[0]


def logged_ess(weights: np.ndarray, logged: np.ndarray, groups: np.ndarray, n_models: int) -> np.ndarray:
    """(T,) each model's effective sample size among rows (Kish's, of ``weights`` (n,), the weights of one
    prompt's rows that logged the model summed into one: a prompt logged again is not more evidence)."""
    G = int(groups.max()) + 1 if len(groups) else 0
    return np.array([effective_sample_size(np.bincount(groups, np.where(logged == t, weights, 0.0), minlength=G))
                     for t in range(n_models)])  # fmt: skip


def choose_regions(
    quality: np.ndarray,
    cost: np.ndarray,
    logged: np.ndarray,
    regions: Regions,
    groups: np.ndarray,
    baseline: int,
    lam: float,
    *,
    propensity: np.ndarray,
    alpha: float = ALPHA,
    min_prompts: int = MIN_PROMPTS,
    min_matched: int = MIN_MATCHED,
    min_ess: float = MIN_ESS,
    folds: list[np.ndarray] | None = None,
    aggregate: bool = False,
    population: np.ndarray | None = None,
) -> RegionChoice:
    """Per region, the model to serve at ``lam`` (module doc). ``quality``, ``cost`` (n, T): DR scores,
    out of fold; ``logged`` (n,): the model each row logged, ``propensity`` (n,) its probability; ``groups``
    (n,): each row's prompt, in 0..G-1 (:func:`~regret_gateway.causal.stats.prompt_groups`). With
    ``folds`` (row indices), each region tests one challenger per row, the model the other folds' rows
    propose for the region (:func:`proposals`), with no correction over the models. ``population`` (n,)
    bool: the rows of the requests the tier serves (None: every row) -- the whole proposal's test reads
    those rows only, so it gains on the tier's own mix of regions: every row is evidence of a region's
    gain, but a proposal that gains on other tiers' apps may lose on this tier's."""
    n, T = quality.shape
    R = regions.n_regions
    d = (quality - lam * cost) - (quality[:, [baseline]] - lam * cost[:, [baseline]])  # (n, T) gain over b
    members = []  # per region: its rows, and each row's prompt in 0..G_r-1
    for r in range(R):
        rows = np.flatnonzero(regions.region == r)
        members.append((rows, np.unique(groups[rows], return_inverse=True)[1].reshape(-1)))
    testable, alone = _logged_enough(members, logged, propensity, T, baseline, min_matched, min_ess, regions.keyed)
    proposed = published = None
    if folds is not None:  # per row, what the other folds propose for its region; per region, what all its rows do
        proposed = proposals(d, logged, regions.region, R, folds, baseline, min_matched, testable, shrink=regions.keyed)
        published = region_proposal(d, logged, regions.region, R, np.arange(n), baseline, min_matched, testable,
                                    shrink=regions.keyed)  # fmt: skip
    models = np.full(R, baseline)
    gain, p_values, ses = np.zeros(R), np.ones(R), np.zeros(R)  # ses > 0: the region is tested
    inside = regions.region >= 0
    share = np.bincount(regions.region[inside], minlength=R) / n
    challengers = max(1, T - 1) if proposed is None else 1
    z_any = z_critical(alpha, challengers)
    # one region is the whole traffic, unless it is one key's: the baseline is its best model
    for r in range(R if R > 1 or regions.keyed else 0):
        rows, g = members[r]
        n_g = int(g.max()) + 1 if len(rows) else 0
        if n_g < min_prompts:
            continue
        mean, se = d[rows].mean(0), clustered_se(d[rows], g)
        z = np.where(se > 0, mean / np.where(se > 0, se, 1.0), 0.0)
        eligible = testable[r] & (np.arange(T) != baseline) & (se > 0)
        if not eligible.any():
            continue
        if proposed is None or published is None:
            m = int(np.argmax(np.where(eligible, z, -np.inf)))
            models[r], gain[r], ses[r] = m, mean[m], se[m]
            p_values[r] = min(1.0, challengers * p_value(z[m]))
            continue
        # each row's gain under what the other folds proposed for the region (the baseline: 0), out of fold;
        # whether a region is tested reads no outcome, so the test's rows did not choose what it tests
        own = d[rows, proposed[rows]]
        own_mean, own_se = own.mean(), clustered_se(own, g)
        if own_se <= 0:
            continue
        models[r] = published[r]  # what the region serves if it departs: what all its rows propose
        gain[r], ses[r] = own_mean, own_se
        p_values[r] = p_value(own_mean / own_se)
    lower = np.where(ses > 0, gain - z_any * ses, -np.inf)  # each tested region's plain one-sided bound
    if aggregate and proposed is not None and (R > 1 or regions.keyed):
        whole = _whole_proposal(d[np.arange(n), proposed], regions.region, groups, population, baseline, models, gain,
                                lower, share, alpha)  # fmt: skip
        if whole is not None:
            return whole
    p_values = np.where(alone[np.arange(R), models] & (models != baseline), p_values, 1.0)  # alone, a region needs min_ess
    return _one_by_one(baseline, models, gain, lower, ses, p_values, share, alpha, challengers)


def _logged_enough(
    members: list[tuple[np.ndarray, np.ndarray]], logged: np.ndarray, propensity: np.ndarray, T: int, baseline: int,
    min_matched: int, min_ess: float, keyed: bool,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(testable, alone), each (R, T) bool: whether each model was logged often enough in each region, beside
    the baseline, to join the whole proposal's test (``MIN_KEY_ESS`` effective rows for a key's region) and to
    be tested alone (``min_ess``). Reads no outcome (module doc)."""
    testable, alone = np.zeros((len(members), T), dtype=bool), np.zeros((len(members), T), dtype=bool)
    for r, (rows, g) in enumerate(members):
        if len(rows):
            ess = logged_ess(1.0 / propensity[rows], logged[rows], g, T)
            matched = np.bincount(logged[rows], minlength=T) >= min_matched
            testable[r] = matched & (ess >= (MIN_KEY_ESS if keyed else min_ess))
            alone[r] = matched & (ess >= min_ess)
    return testable & testable[:, [baseline]], alone & alone[:, [baseline]]


def _whole_proposal(
    own_gain: np.ndarray, region: np.ndarray, groups: np.ndarray, population: np.ndarray | None, baseline: int,
    models: np.ndarray, gain: np.ndarray, lower: np.ndarray, share: np.ndarray, alpha: float,
) -> RegionChoice | None:  # fmt: skip
    """The whole proposal tested at once (module doc): every row of a tested region (finite ``lower``) under
    what the other folds proposed for it (its gain ``own_gain`` (n,)), the rest under the baseline (gain 0),
    on the ``population``'s rows. Where it gains, every tested region whose rows gained departs, and the
    claim is its gain with the bound given that it passed (:func:`~regret_gateway.confidence.selective_lower`);
    else None."""
    inside = region >= 0
    tested = inside & np.isfinite(lower)[np.where(inside, region, 0)]
    own = np.where(tested, own_gain, 0.0)
    on = np.arange(len(own)) if population is None else np.flatnonzero(population)
    se_all = clustered_se(own[on], np.unique(groups[on], return_inverse=True)[1].reshape(-1)) if len(on) else 0.0
    if not (se_all > 0 and own[on].mean() / se_all > z_critical(alpha)):
        return None
    adopted = (gain > 0) & (models != baseline) & np.isfinite(lower)
    models = np.where(adopted, models, baseline)
    total = float(own[on].mean()) if adopted.any() else 0.0
    bound = selective_lower(total, float(se_all), z_critical(alpha), alpha) if adopted.any() else float("-inf")
    return RegionChoice(baseline, models, adopted, np.where(adopted, gain, 0.0), lower, share, total, bound)


def _one_by_one(
    baseline: int, models: np.ndarray, gain: np.ndarray, lower: np.ndarray, ses: np.ndarray, p_values: np.ndarray,
    share: np.ndarray, alpha: float, challengers: int,
) -> RegionChoice:  # fmt: skip
    """The regions Holm's step-down adopts over ``p_values`` (R,), and what they claim: each adopted region's
    bound given that it passed at its step's level (:func:`~regret_gateway.confidence.selective_lower`, at
    ``alpha`` shared among the adopted regions, so that their bounds, weighted by ``share``, hold together)."""
    adopted = holm(p_values, alpha, ahead=gain > 0)
    models = np.where(adopted, models, baseline)
    levels, claimed = holm_levels(p_values, alpha), np.array(lower, dtype=np.float64)
    for r in np.flatnonzero(adopted):
        claimed[r] = selective_lower(gain[r], ses[r], z_critical(levels[r], challengers), alpha / adopted.sum())
    total = float((share * gain)[adopted].sum())
    bound = float((share * claimed)[adopted].sum()) if adopted.any() else float("-inf")
    return RegionChoice(baseline, models, adopted, np.where(adopted, gain, 0.0), claimed, share, total, bound)


def region_policy(model_names: tuple[str, ...], regions: Regions, choice: RegionChoice) -> RegionPolicy:
    """The servable policy of ``choice``: nearest centroid, then the region's model."""
    if regions.keyed:
        return RegionPolicy(model_names, regions.centroids, choice.models, reach=regions.reach, default=choice.baseline)
    return RegionPolicy(model_names, regions.centroids, choice.models)


def proposals(
    d: np.ndarray, logged: np.ndarray, region: np.ndarray, R: int, folds: list[np.ndarray], baseline: int, min_matched: int,
    testable: np.ndarray, *, shrink: bool = False,
) -> np.ndarray:  # fmt: skip
    """(n,) per row, the model with the highest mean gain ``d`` (n, T) over the baseline in the row's region
    on the rows of the other folds (among the models they logged ``min_matched`` times there and that
    ``testable`` (R, T) allows in the region; the baseline where none is ahead, or the row is in no region:
    ``region`` -1). ``shrink``: each region's mean shrunk toward the model's over the regions
    (:func:`shrunk_means`)."""
    n = len(d)
    out = np.full(n, baseline)
    for fold in folds:
        rest = np.setdiff1d(np.arange(n), fold)
        pick = region_proposal(d, logged, region, R, rest, baseline, min_matched, testable, shrink=shrink)
        inside = fold[region[fold] >= 0]
        out[inside] = pick[region[inside]]
    return out


def region_proposal(
    d: np.ndarray, logged: np.ndarray, region: np.ndarray, R: int, rows: np.ndarray, baseline: int, min_matched: int,
    testable: np.ndarray, *, shrink: bool = False,
) -> np.ndarray:  # fmt: skip
    """(R,) per region, the model with the highest mean gain ``d`` over the baseline on ``rows`` (as
    :func:`proposals` does on the other folds' rows)."""
    T = d.shape[1]
    rest = rows[region[rows] >= 0]
    counts = np.bincount(region[rest], minlength=R).astype(np.float64)
    sums = np.stack([np.bincount(region[rest], d[rest, t], minlength=R) for t in range(T)], axis=1)
    hits = np.stack([np.bincount(region[rest], logged[rest] == t, minlength=R) for t in range(T)], axis=1)
    valid = (hits >= min_matched) & testable
    mean = sums / np.maximum(counts, 1.0)[:, None]
    if shrink:
        squares = np.stack([np.bincount(region[rest], d[rest, t] ** 2, minlength=R) for t in range(T)], axis=1)
        mean = shrunk_means(mean, squares / np.maximum(counts, 1.0)[:, None] - mean**2, counts, valid)
    mean = np.where(valid, mean, -np.inf)
    mean[:, baseline] = 0.0
    return np.argmax(mean, axis=1)


def shrunk_means(mean: np.ndarray, var: np.ndarray, counts: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(R, T) each region's ``mean`` (R, T; of ``counts`` (R,) rows with variance ``var``) shrunk toward the
    model's mean over the ``valid`` regions: m + B (mean - m), B = tau^2 / (tau^2 + se^2), se^2 = var / count,
    tau^2 the spread of the regions' means beyond their noise (method of moments, at least 0). A model with
    fewer than three valid regions keeps its means."""
    se2 = np.maximum(var, 0.0) / np.maximum(counts, 1.0)[:, None]
    out = mean.copy()
    for t in range(mean.shape[1]):
        v = valid[:, t]
        if v.sum() < 3:
            continue
        m = np.average(mean[v, t], weights=counts[v])
        tau2 = max(0.0, float(np.var(mean[v, t], ddof=1) - se2[v, t].mean()))
        B = tau2 / np.maximum(tau2 + se2[:, t], 1e-12)
        out[:, t] = m + B * (mean[:, t] - m)
    return out
