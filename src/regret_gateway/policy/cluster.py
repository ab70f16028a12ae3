"""RM-Cluster: regret minimisation over cluster policies.

The RM objective -- the mean doubly robust utility of the chosen model, i.e. minus the estimated regret --
maximised over a small policy class: the policies that send every prompt of one embedding cluster to
the same model (policy learning over a restricted class with DR scores, as in Athey and Wager, 2021).
Over that class the maximiser is exact and closed-form: per cluster, the model with the highest mean DR
score A - lambda * C. Each cluster's mean quality and cost of a model are shrunk toward that model's
global mean by empirical Bayes (:func:`shrunk_means`): as far as the cluster's noise exceeds the spread
between clusters, so a noisy cluster falls back to the fixed choice; K = 1 *is* the best constant model.

Clusters: spherical k-means (k-means++ seeding) on the unit-normalised training embeddings (a seeded
sample of 10,000 where there are more; ``retrain``'s fits share one clustering of every logged prompt,
:class:`SharedCentroids`), for each K in ``clusters`` with at least ``min_rows_per_model``
training rows per model and cluster on average; the fewest clusters whose validation DR regret
(averaged over the lambdas) is within one paired standard error of the lowest is kept (the
one-standard-error rule: splitting must earn its place). One fit serves every lambda: the policy keeps
per-cluster quality and cost, and routes with argmax_t A_k(t) - lambda * C_k(t) (:class:`~regret_gateway.servable.ClusterPolicy`).

Why it is here: a network trained on a few hundred noisy DR scores per model learns less than the task
structure the embedding already shows (docs/experiments/served.md); averaging the scores of a whole
cluster is the low-variance way to read it.
"""

from __future__ import annotations

import numpy as np

from regret_gateway.policy.router import Lambdas, Router, TrainingData, check_lambdas, row_regret
from regret_gateway.servable import CandidateKind, ClusterPolicy, unit_rows


def spherical_kmeans(
    Z: np.ndarray, k: int, *, seed: int = 0, iters: int = 50, restarts: int = 4, sample: int = 10_000
) -> np.ndarray:
    """(k, d) unit centroids of the unit rows ``Z`` (n, d): cosine k-means from k-means++ seeds, the best
    (highest total similarity to the assigned centroid) of ``restarts`` runs. Beyond ``sample`` rows the
    centroids are fitted on a seeded sample of that many (at most 64 clusters: over 150 rows per
    cluster), so a retrain on a large log pays a bounded cost; single precision, as the embeddings are."""
    rng = np.random.default_rng(seed)
    if len(Z) > sample:
        Z = Z[np.sort(rng.choice(len(Z), size=sample, replace=False))]
    Z = np.asarray(Z, dtype=np.float32)
    n = len(Z)
    k = max(1, min(k, n))
    best, best_fit = None, -np.inf
    for _ in range(restarts):
        centers = [Z[rng.integers(n)]]
        far = 1.0 - Z @ centers[0]  # cosine distance to the nearest centre so far (half the squared distance)
        for _ in range(1, k):
            p = np.clip(far, 0.0, None).astype(np.float64)
            centers.append(Z[rng.choice(n, p=p / p.sum())] if p.sum() > 0 else Z[rng.integers(n)])
            far = np.minimum(far, 1.0 - Z @ centers[-1])
        C = np.stack(centers)
        for _ in range(iters):
            a = np.argmax(Z @ C.T, axis=1)
            sums = cluster_sums(Z, a, k)
            moved = unit_rows(np.where(np.bincount(a, minlength=k)[:, None] > 0, sums, C))
            if np.allclose(moved, C):
                break
            C = moved
        fit = float((Z @ C.T).max(axis=1).sum())
        if fit > best_fit:
            best, best_fit = C, fit
    assert best is not None
    return best.astype(np.float64)


class SharedCentroids(dict):
    """K -> the (K, d) spherical k-means centroids of the unit rows ``Z``, computed the first time a K is
    asked for. k-means reads no outcome, so the fits of cross-fitting may share one clustering of every
    logged prompt (:func:`regret_gateway.retrain.gate.evaluate`): one k-means per K instead of one
    per fold."""

    def __init__(self, Z: np.ndarray, seed: int = 0) -> None:
        super().__init__()
        self.Z, self.seed = np.asarray(Z, dtype=np.float32), seed

    def __missing__(self, k: int) -> np.ndarray:
        self[k] = spherical_kmeans(self.Z, k, seed=self.seed)
        return self[k]


class RMCluster(Router):
    """Per embedding cluster, the model with the best mean DR utility (see the module docstring).

    Args:
        clusters: the numbers of clusters K tried (1 = the best constant model).
        min_rows_per_model: a K is tried only if n / (K * T) reaches this.
        centroids: K -> unit centroids to use instead of a k-means of the training rows (e.g. a
            :class:`SharedCentroids` of every logged prompt).
    """

    name = CandidateKind.RM_CLUSTER.value

    def __init__(
        self,
        *,
        clusters: tuple[int, ...] = (1, 4, 8, 16, 32, 64),
        min_rows_per_model: float = 5.0,
        centroids: dict[int, np.ndarray] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)  # the base's ``train`` and ``hidden`` are unused: no network is trained
        if not clusters or min(clusters) < 1:
            raise ValueError(f"`clusters` must be numbers >= 1, got {clusters}")
        self.clusters, self.min_rows_per_model = tuple(clusters), float(min_rows_per_model)
        self.centroids = centroids

    def _policy(self, data: TrainingData, Z: np.ndarray, k: int) -> ClusterPolicy:
        """The K-cluster policy on the training rows, whose unit embeddings are ``Z``."""
        C = spherical_kmeans(Z, k, seed=self.random_state) if self.centroids is None else self.centroids[k]
        a = np.argmax(Z @ C.T, axis=1)
        quality, cost = data.scores.quality, data.scores.cost
        return ClusterPolicy(data.model_names, C, shrunk_means(quality, a, len(C)), shrunk_means(cost, a, len(C)))

    def fit(self, data: TrainingData, lambdas: Lambdas) -> "RMCluster":
        lam = check_lambdas(lambdas)
        n, T = data.scores.quality.shape
        ks = [k for k in sorted(set(self.clusters)) if k == 1 or n / (k * T) >= self.min_rows_per_model] or [1]
        Z = unit_rows(np.asarray(data.X, dtype=np.float64))
        policies = {k: self._policy(data, Z, k) for k in ks}
        regret = {  # (n_val,) validation regret per row, averaged over the lambdas
            k: np.mean([row_regret(data.val_scores.utility(l), p.choose(data.X_val, l)) for l in lam], axis=0)
            for k, p in policies.items()
        }
        best = min(ks, key=lambda k: regret[k].mean())
        # the fewest clusters whose regret is within one standard error of the best (paired): more
        # clusters must earn their place, or a world where the prompt does not matter gets split on noise
        self.k_ = next(k for k in ks if (regret[k] - regret[best]).mean() <= _se(regret[k] - regret[best]))
        self.validation_regret_ = {k: float(r.mean()) for k, r in regret.items()}
        self.policy_, self.fitted_ = policies[self.k_], True
        return self

    def predict(self, X: np.ndarray, lambdas: Lambdas) -> np.ndarray:
        self._check_fitted()
        return np.stack([self.policy_.choose(X, l) for l in check_lambdas(lambdas)])

    def to_policy(self) -> ClusterPolicy:
        self._check_fitted()
        return self.policy_


def cluster_sums(values: np.ndarray, cluster: np.ndarray, k: int) -> np.ndarray:
    """(k, d) the sum of the rows of ``values`` (n, d) in each cluster ``cluster`` (n,) in 0..k-1, as a
    one-hot (k, n) product: on 20,000 x 384 embeddings 22 ms against ``np.add.at``'s 103 ms."""
    values = np.asarray(values)
    onehot = np.zeros((k, len(cluster)), dtype=np.result_type(values.dtype, np.float32))
    onehot[cluster, np.arange(len(cluster))] = 1.0
    return onehot @ values


def _se(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def shrunk_means(values: np.ndarray, cluster: np.ndarray, k: int) -> np.ndarray:
    """(k, T) per-cluster means of ``values`` (n, T), shrunk toward the column means (empirical Bayes,
    normal-normal): mean_c + B (m_kt - mean_c) with B = tau_t^2 / (tau_t^2 + v_kt), where v_kt is the
    squared standard error of the cluster mean and tau_t^2 the spread of the cluster means beyond their
    noise (moment estimate, weighted by cluster size). An empty or one-row cluster is the column mean."""
    counts = np.bincount(cluster, minlength=k).astype(np.float64)[:, None]
    sums, squares = np.split(cluster_sums(np.concatenate([values, values**2], axis=1), cluster, k), 2, axis=1)
    mean = sums / np.maximum(counts, 1.0)
    var = np.maximum(squares - counts * mean**2, 0.0) / np.maximum(counts - 1.0, 1.0)
    noise = np.where(counts > 1, var / np.maximum(counts, 1.0), np.inf)  # squared standard error
    overall = values.mean(0)
    w = counts / counts.sum()
    spread = np.maximum((w * (mean - overall) ** 2).sum(0) - (w * np.where(np.isfinite(noise), noise, 0.0)).sum(0), 0.0)
    weight = np.where(np.isfinite(noise), spread / (spread + noise + 1e-300), 0.0)
    return overall + weight * (mean - overall)
