"""Safe policy improvement region by region: the tier's best constant model, except in the regions of
prompt space whose logs prove that another model is better there (SPIBB's idea -- Laroche, Trichelair and
Tachet des Combes, 2019: depart from the baseline only where the data is sufficient -- with the proof a
confidence bound).

* Regions: spherical k-means of the logged prompts' unit embeddings (each distinct prompt once), about
  ``prompts_per_region`` prompts per region, at most ``max_regions``. The regions read no outcome, so the
  same rows may test them.
* Evidence: every logged row's out-of-fold DR scores Gamma_i(t) of quality and cost (every tier's rows: a
  model's quality and cost do not depend on the tier that logged it, and each row carries its own exact
  propensity). In region r, the gain of model m over the baseline b at lambda is the mean over the
  region's rows of d_i = Gamma_i(m) - Gamma_i(b) (utility A - lambda C, unclipped).
* Test: a one-sided z test per (region, model), its standard error clustered by prompt (rows of one
  prompt count as one draw); within a region, Bonferroni over the T - 1 challengers; across regions,
  Holm's step-down at ``alpha``. So, with probability about 1 - alpha, every region that departs from
  the baseline gains there. A region is tested only with at least ``min_prompts`` prompts and
  ``min_matched`` rows that logged its challenger and as many that logged the baseline.
* The policy (:class:`~regret_gateway.servable.RegionPolicy`): nearest centroid, then the region's model.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from regret_gateway.policy.cluster import spherical_kmeans
from regret_gateway.servable import RegionPolicy, unit_rows

ALPHA = 0.05  # family-wise error over a tier's regions
PROMPTS_PER_REGION = 200
MAX_REGIONS = 32
MIN_PROMPTS = 30
MIN_MATCHED = 10


@dataclass(frozen=True)
class Regions:
    """The partition of prompt space the tiers test: ``centroids`` (R, d) and each row's ``region`` (n,)."""

    centroids: np.ndarray
    region: np.ndarray

    @property
    def n_regions(self) -> int:
        return len(self.centroids)


def fit_regions(
    X: np.ndarray,
    groups: np.ndarray,
    *,
    prompts_per_region: int = PROMPTS_PER_REGION,
    max_regions: int = MAX_REGIONS,
    seed: int = 0,
) -> Regions:
    """k-means regions of the distinct prompts of ``X`` (n, d) (``groups`` (n,): rows of one prompt)."""
    n_groups = int(groups.max()) + 1
    first = np.full(n_groups, -1)
    first[groups[::-1]] = np.arange(len(groups))[::-1]  # one row per prompt
    Z = unit_rows(np.asarray(X[first], dtype=np.float32))
    k = int(np.clip(n_groups // prompts_per_region, 1, max_regions))
    centroids = spherical_kmeans(Z, k, seed=seed) if k > 1 else unit_rows(Z.mean(0, keepdims=True))
    region = np.argmax(unit_rows(np.asarray(X, dtype=np.float32)) @ centroids.T.astype(np.float32), axis=1)
    return Regions(np.asarray(centroids, dtype=np.float32), region)


@dataclass(frozen=True)
class RegionChoice:
    """One tier's regional policy: per region the model served (the baseline where nothing is proven),
    whether it departs, its estimated gain over the baseline and the gain's lower confidence bound (x1,
    utility per request), and each region's share of the logged rows."""

    baseline: int
    models: np.ndarray
    adopted: np.ndarray
    gain: np.ndarray
    lower: np.ndarray
    share: np.ndarray

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
            f"({100 * self.adopted_share:.0f}% of the logged requests), each with a proven gain"
        )


def _prompt_sums(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """(G, T) per-prompt sums of ``values`` (n, T)."""
    return np.stack([np.bincount(groups, values[:, t], minlength=n_groups) for t in range(values.shape[1])], axis=1)


def choose_regions(
    quality: np.ndarray,
    cost: np.ndarray,
    logged: np.ndarray,
    regions: Regions,
    groups: np.ndarray,
    baseline: int,
    lam: float,
    *,
    alpha: float = ALPHA,
    min_prompts: int = MIN_PROMPTS,
    min_matched: int = MIN_MATCHED,
) -> RegionChoice:
    """Per region, the model to serve at ``lam`` (module doc). ``quality``, ``cost`` (n, T): DR scores,
    out of fold; ``logged`` (n,): the model each row logged; ``groups`` (n,): each row's prompt."""
    n, T = quality.shape
    R = regions.n_regions
    d = (quality - lam * cost) - (quality[:, [baseline]] - lam * cost[:, [baseline]])  # (n, T) gain over b
    models = np.full(R, baseline)
    gain, lower, p_value = np.zeros(R), np.full(R, -np.inf), np.ones(R)
    share = np.bincount(regions.region, minlength=R) / n
    z_any = NormalDist().inv_cdf(1.0 - alpha / max(1, T - 1))
    for r in range(R if R > 1 else 0):  # one region is the whole traffic: the baseline is its best model
        rows = np.flatnonzero(regions.region == r)
        g = np.unique(groups[rows], return_inverse=True)[1].reshape(-1)
        n_g = int(g.max()) + 1 if len(rows) else 0
        if n_g < min_prompts:
            continue
        hits = np.bincount(logged[rows], minlength=T)
        mean = d[rows].mean(0)
        resid = _prompt_sums(d[rows] - mean, g, n_g)  # (G, T): each prompt's summed deviation
        se = np.sqrt((resid**2).sum(0) * n_g / max(n_g - 1, 1)) / len(rows)
        z = np.where(se > 0, mean / np.where(se > 0, se, 1.0), 0.0)
        eligible = (hits >= min_matched) & (hits[baseline] >= min_matched) & (np.arange(T) != baseline) & (se > 0)
        if not eligible.any():
            continue
        m = int(np.argmax(np.where(eligible, z, -np.inf)))
        models[r], gain[r], lower[r] = m, mean[m], mean[m] - z_any * se[m]
        p_value[r] = min(1.0, (T - 1) * (1.0 - NormalDist().cdf(z[m])))
    adopted = np.zeros(R, dtype=bool)
    for j, r in enumerate(np.argsort(p_value, kind="stable")):  # Holm's step-down over the regions
        if p_value[r] > alpha / (R - j) or gain[r] <= 0:
            break
        adopted[r] = True
    models = np.where(adopted, models, baseline)
    return RegionChoice(baseline, models, adopted, np.where(adopted, gain, 0.0), lower, share)


def region_policy(model_names: tuple[str, ...], regions: Regions, choice: RegionChoice) -> RegionPolicy:
    """The servable policy of ``choice``: nearest centroid, then the region's model."""
    return RegionPolicy(model_names, regions.centroids, choice.models)
