"""Servable policies: what a published router is, to the gateway.

A servable policy maps an embedding batch and a cost weight lambda to one score per model:
``logits(X, lam) -> (n, T)`` over ``model_names``; the gateway routes to the argmax. Its ``state()`` is a
tree of plain values and numpy arrays (what :mod:`regret_gateway.artifacts` writes as JSON and ``.npz``),
rebuilt with :func:`from_state`. This module is the serving path's whole view of a router and imports
numpy only: no torch, no training code.

Routing runs in numpy: a policy holds its trained weights as float32 arrays (:class:`MLPArrays`,
:class:`IntervalArrays`, taken with ``.of(net)`` from the trained torch networks where they are fitted)
and computes its scores with them, one matrix product per layer and only the network the lambda needs.

Kinds:

* ``rm-interval`` (:class:`TieredPolicy`): one policy network per tier lambda and an interval net
  between adjacent tiers. Routing rule: lambda equal to a tier -> that tier's network; strictly between
  two tiers -> that interval's net, at position s = (lam - l_j) / (l_j+1 - l_j); below the first or above
  the last tier -> the nearest tier.
* ``r-and-c`` (:class:`OutcomePolicy`): outcome networks r_t(x) = (quality, cost); logits
  A(t) - lam * C(t).
* ``constant`` (:class:`ConstantPolicy`): one model for every request (the fixed choice).
* ``cluster`` (:class:`ClusterPolicy`): RM-Cluster -- the nearest of K embedding centroids, then that
  cluster's estimated argmax A(t) - lam * C(t).
* ``regions`` (:class:`RegionPolicy`): the nearest of R embedding centroids, then that region's model
  (retrain's safe regional policy: the tier's constant except where the logs prove a gain).
* ``per-tier`` (:class:`PerTierPolicy`): one policy of any kind per tier lambda (what ``retrain``
  publishes: each tier serves the candidate it chose). A lambda equal to a tier's uses that tier's
  policy; between two tiers served by the same policy, that policy; otherwise the nearest tier's.

``utility_estimates(X, lam)``: what exploration reads -- R&C's and RM-Cluster's scores are estimated
utilities; a per-tier policy carries R&C's outcome networks as its ``estimator`` for every tier.
``logits_and_utilities(X, lam)`` gives both with one forward pass where the scores are the utilities.
"""

from __future__ import annotations

import bisect
from typing import Any, ClassVar, Sequence

import numpy as np


def check_lambda(lam: float) -> float:
    lam = float(lam)
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lambda must be finite and >= 0, got {lam}")
    return lam


# erf by Abramowitz and Stegun 7.1.26 (absolute error <= 1.5e-7, float32's resolution): numpy has no erf.
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592))


def _same_tier(tier: float, lam: float) -> bool:
    """``lam`` is the tier's lambda, to numpy's ``isclose`` tolerance (in plain floats: isclose costs tens of
    microseconds a call, on every routed request's path)."""
    return abs(tier - lam) <= 1e-8 + 1e-5 * abs(lam)


def gelu(x: np.ndarray) -> np.ndarray:
    """The exact (erf) GELU of torch's default, in float32: 0.5 x (1 + erf(x / sqrt 2)). In place on two
    temporaries (Horner's rule for the polynomial): half the time of the plain expression, the same bits."""
    z = np.abs(x)
    z *= np.float32(1 / np.sqrt(2))
    t = _ERF_P * z
    t += 1
    np.reciprocal(t, out=t)
    erf = t * _ERF_A[0]
    for a in _ERF_A[1:]:
        erf += a
        erf *= t
    np.multiply(z, z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    erf *= z
    np.subtract(1, erf, out=erf)
    np.copysign(erf, x, out=erf)
    erf += 1
    erf *= x
    erf *= np.float32(0.5)
    return erf


def _float32(value: Any) -> np.ndarray:
    """A trained parameter (a torch tensor, read without importing torch) or an array, as float32 numpy."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.ascontiguousarray(value, dtype=np.float32)


class MLPArrays:
    """M stacked MLPs' weights as float32 arrays (``weights[i]`` (M, in, out), ``biases[i]`` (M, 1, out)),
    GELU between layers, and their forward pass in numpy: ``forward(X)`` -> (M, n, d_out) for X (n, d_in);
    ``forward(X, m)`` -> (n, d_out), member ``m`` alone. ``MLPArrays.of(net)`` snapshots a trained
    :class:`~regret_gateway.nn.networks.StackedMLP`."""

    def __init__(self, weights: Sequence[Any], biases: Sequence[Any]) -> None:
        self.weights = [_float32(w) for w in weights]
        self.biases = [_float32(b) for b in biases]
        if not self.weights or len(self.weights) != len(self.biases):
            raise ValueError("an MLP needs one bias per weight matrix, and at least one layer")
        members = self.weights[0].shape[0]
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            fan_in = self.weights[i - 1].shape[2] if i else w.shape[1]
            if w.ndim != 3 or w.shape[0] != members or w.shape[1] != fan_in or b.shape != (members, 1, w.shape[2]):
                raise ValueError(f"layer {i}: weight {w.shape} / bias {b.shape} do not chain ({members} members)")

    @classmethod
    def of(cls, net: Any) -> "MLPArrays":
        return cls(list(net.weights), list(net.biases))

    @property
    def n_members(self) -> int:
        return int(self.weights[0].shape[0])

    @property
    def d_in(self) -> int:
        return int(self.weights[0].shape[1])

    @property
    def d_out(self) -> int:
        return int(self.weights[-1].shape[2])

    def state(self) -> dict[str, Any]:
        return {"weights": list(self.weights), "biases": list(self.biases)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "MLPArrays":
        return cls(state["weights"], state["biases"])

    def forward(self, X: np.ndarray, member: int | None = None) -> np.ndarray:
        h = X
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w + b if member is None else h @ w[member] + b[member]
            if i < last:
                h = gelu(h)
        return h


class IntervalArrays:
    """RM-Interval's K interval nets as float32 arrays: g(s) = GELU(s * g_weight + g_bias) (K, 1, 2T);
    out = (ends + g) @ out_weight (K, 2T, T) + out_bias (K, 1, T). ``IntervalArrays.of(nets)`` snapshots a
    trained :class:`~regret_gateway.nn.networks.IntervalNets`."""

    FIELDS = ("g_weight", "g_bias", "out_weight", "out_bias")

    def __init__(self, g_weight: Any, g_bias: Any, out_weight: Any, out_bias: Any) -> None:
        self.g_weight, self.g_bias = _float32(g_weight), _float32(g_bias)
        self.out_weight, self.out_bias = _float32(out_weight), _float32(out_bias)
        K, two_t, T = self.out_weight.shape
        if (self.g_weight.shape, self.g_bias.shape, self.out_bias.shape) != ((K, 1, two_t),) * 2 + ((K, 1, T),) or two_t != 2 * T:
            raise ValueError(f"interval arrays do not fit together: out_weight {self.out_weight.shape}, "
                             f"g {self.g_weight.shape}/{self.g_bias.shape}, out_bias {self.out_bias.shape}")  # fmt: skip

    @classmethod
    def of(cls, nets: Any) -> "IntervalArrays":
        return cls(*(getattr(nets, f) for f in cls.FIELDS))

    @property
    def n_intervals(self) -> int:
        return int(self.out_weight.shape[0])

    def state(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.FIELDS}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "IntervalArrays":
        return cls(*(state[f] for f in cls.FIELDS))

    def forward(self, ends: np.ndarray, s: float, j: int) -> np.ndarray:
        """Interval ``j``'s logits (n, T) at position ``s`` in [0, 1] from its ends' logits (n, 2T)."""
        g = gelu(np.float32(s) * self.g_weight[j] + self.g_bias[j])
        return (ends + g) @ self.out_weight[j] + self.out_bias[j]


class ServablePolicy:
    """Base of the servable policies; a subclass implements :meth:`_logits`, :meth:`_state`, :meth:`_from_state`
    (numpy in, numpy out), and :meth:`_utilities` where its scores can be read as utilities.

    Attributes:
        model_names: the T models, one per output column.
        dim: embedding size the policy reads (None: it reads no embedding).
    """

    kind: ClassVar[str] = "base"
    scores_are_utilities: ClassVar[bool] = False  # True: the logits are the estimated utilities (R&C, RM-Cluster)

    def __init__(self, model_names: Sequence[str], dim: int | None) -> None:
        self.model_names = tuple(str(m) for m in model_names)
        self.dim = dim

    @property
    def n_models(self) -> int:
        return len(self.model_names)

    def _input(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or (self.dim is not None and X.shape[1] != self.dim):
            raise ValueError(f"`X` must have shape (n, {self.dim}), got {X.shape}")
        return X

    def logits(self, X: np.ndarray, lam: float) -> np.ndarray:
        """(n, T) scores of every model for each row of ``X`` (n, dim) at cost weight ``lam``."""
        return self._logits(self._input(X), check_lambda(lam))

    def choose(self, X: np.ndarray, lam: float) -> np.ndarray:
        """(n,) index of the chosen model per row."""
        return self.logits(X, lam).argmax(-1)

    def utility_estimates(self, X: np.ndarray, lam: float) -> np.ndarray | None:
        """(n, T) estimated utility quality - lam * cost of every model (in quality units), or None for a
        policy whose scores are not utilities (RM-Interval's logits, the constant). Exploration spends its
        share of traffic by these gaps (``gateway/decisions.py``)."""
        return self._utilities(self._input(X), check_lambda(lam))

    def logits_and_utilities(self, X: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray | None]:
        """``(logits(X, lam), utility_estimates(X, lam))``, with one forward pass where they are the same."""
        return self._both(self._input(X), check_lambda(lam))

    def _both(self, X: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray | None]:
        logits = self._logits(X, lam)
        return logits, (logits if self.scores_are_utilities else self._utilities(X, lam))

    def _utilities(self, X: np.ndarray, lam: float) -> np.ndarray | None:
        return self._logits(X, lam) if self.scores_are_utilities else None

    def state(self) -> dict[str, Any]:
        """Plain values (JSON) and numpy arrays only: what :mod:`regret_gateway.artifacts` writes."""
        return {
            "kind": self.kind,
            "model_names": list(self.model_names),
            "d_in": self.dim,
            "n_models": self.n_models,
            **self._state(),
        }

    def _logits(self, X: np.ndarray, lam: float) -> np.ndarray:
        raise NotImplementedError

    def _state(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def _from_state(cls, state: dict[str, Any], model_names: tuple[str, ...]) -> "ServablePolicy":
        raise NotImplementedError


class TieredPolicy(ServablePolicy):
    """RM-Interval at serving time: tier networks ``tier_arrays`` (m members) and ``intervals`` (m - 1)."""

    kind = "rm-interval"

    def __init__(
        self,
        model_names: Sequence[str],
        tiers: Sequence[float] | np.ndarray,
        tier_arrays: MLPArrays,
        intervals: IntervalArrays | None,
        *,
        tau: float = 1.0,
        interval_tau: float = 10.0,
    ) -> None:
        super().__init__(model_names, tier_arrays.d_in)
        self.tiers = np.asarray(tiers, dtype=np.float64)
        self._tier_values = tuple(float(t) for t in self.tiers)
        if tier_arrays.n_members != len(self.tiers) or tier_arrays.d_out != self.n_models:
            raise ValueError(
                f"tier network has {tier_arrays.n_members} members x {tier_arrays.d_out} outputs, "
                f"expected {len(self.tiers)} tiers x {self.n_models} models"
            )
        if len(self.tiers) > 1 and (intervals is None or intervals.n_intervals != len(self.tiers) - 1):
            raise ValueError(f"{len(self.tiers)} tiers need the {len(self.tiers) - 1} interval networks between them")
        self.tier_arrays, self.intervals = tier_arrays, intervals
        self.tau, self.interval_tau = tau, interval_tau

    def _logits(self, X: np.ndarray, lam: float) -> np.ndarray:
        tiers = self._tier_values
        exact = next((j for j, t in enumerate(tiers) if _same_tier(t, lam)), None)
        if exact is not None or lam <= tiers[0] or lam >= tiers[-1]:
            j = exact if exact is not None else (0 if lam <= tiers[0] else len(tiers) - 1)
            return self.tier_arrays.forward(X, j)
        j = bisect.bisect_left(tiers, lam) - 1  # tiers[j] < lam < tiers[j+1]
        assert self.intervals is not None
        ends = np.concatenate([self.tier_arrays.forward(X, j), self.tier_arrays.forward(X, j + 1)], axis=-1)
        return self.intervals.forward(ends, (lam - tiers[j]) / (tiers[j + 1] - tiers[j]), j)

    def _state(self) -> dict[str, Any]:
        return {
            "tiers": [float(t) for t in self.tiers],
            "tau": self.tau,
            "interval_tau": self.interval_tau,
            "policies": self.tier_arrays.state(),
            "intervals": None if self.intervals is None else self.intervals.state(),
        }

    @classmethod
    def _from_state(cls, state, model_names):
        intervals = None if state["intervals"] is None else IntervalArrays.from_state(state["intervals"])
        return cls(model_names, [float(t) for t in state["tiers"]], MLPArrays.from_state(state["policies"]), intervals,
                   tau=float(state["tau"]), interval_tau=float(state["interval_tau"]))  # fmt: skip


def outcome_heads(out: np.ndarray, cost_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The outcome networks' raw output (T members, n rows, 2) -> float64 ((n, T) quality in [0, 1], (n, T)
    cost >= 0 in USD). The quality head is a logit; the cost head predicts cost / ``cost_scale`` (each
    model's mean logged cost). The one formula for serving (numpy forward) and the nuisance stage (torch)."""
    out = np.asarray(out, dtype=np.float64)
    quality = 1.0 / (1.0 + np.exp(-out[..., 0].T))
    cost = np.maximum(out[..., 1].T * np.asarray(cost_scale, dtype=np.float64)[None, :], 0.0)
    return quality, cost


class OutcomePolicy(ServablePolicy):
    """R&C at serving time: argmax_t of the outcome networks' A(t) - lam * C(t)."""

    kind = "r-and-c"

    def __init__(self, model_names: Sequence[str], arrays: MLPArrays, cost_scale: np.ndarray) -> None:
        super().__init__(model_names, arrays.d_in)
        if arrays.n_members != self.n_models or arrays.d_out != 2:
            raise ValueError(
                f"outcome networks must be {self.n_models} members x 2 outputs, got {arrays.n_members} x {arrays.d_out}"
            )
        self.arrays, self.cost_scale = arrays, np.asarray(cost_scale, dtype=np.float64).reshape(-1)
        if self.cost_scale.shape != (self.n_models,):
            raise ValueError(f"cost_scale must have one value per model ({self.n_models}), got {self.cost_scale.shape}")

    scores_are_utilities = True

    def _logits(self, X, lam):
        quality, cost = outcome_heads(self.arrays.forward(X), self.cost_scale)
        return quality - lam * cost

    def _state(self):
        return {"weights": self.arrays.state(), "cost_scale": self.cost_scale}

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, MLPArrays.from_state(state["weights"]), np.asarray(state["cost_scale"], dtype=np.float64))


class ConstantPolicy(ServablePolicy):
    """Every request to one model: ``model`` at every lambda."""

    kind = "constant"

    def __init__(self, model_names: Sequence[str], model: str, dim: int | None = None) -> None:
        super().__init__(model_names, dim)
        if model not in self.model_names:
            raise ValueError(f"constant model {model!r} is not one of {list(self.model_names)}")
        self.model = model

    def _logits(self, X, lam):
        out = np.zeros((X.shape[0], self.n_models), dtype=np.float32)
        out[:, self.model_names.index(self.model)] = 1.0
        return out

    def _state(self):
        return {"model": self.model}

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, str(state["model"]), None if state["d_in"] is None else int(state["d_in"]))


def nearest_centroid(X: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """(n,) the index of each row's nearest of the unit ``centroids`` (K, d) by cosine similarity (a row's
    norm does not change its argmax): how RM-Cluster and the regional policy assign a request."""
    return np.argmax(X @ centroids.T, axis=1)


def unit_rows(Z: np.ndarray) -> np.ndarray:
    """Rows of ``Z`` scaled to unit length (zero rows stay zero)."""
    norm = np.linalg.norm(Z, axis=-1, keepdims=True)
    return Z / np.where(norm > 0, norm, 1.0)


class ClusterPolicy(ServablePolicy):
    """RM-Cluster at serving time: each row goes to its nearest ``centroids`` (K, d) by cosine similarity,
    and within cluster k to argmax_t quality[k, t] - lam * cost[k, t] ((K, T) estimated means)."""

    kind = "cluster"

    def __init__(self, model_names: Sequence[str], centroids: np.ndarray, quality: np.ndarray, cost: np.ndarray) -> None:
        centroids = np.asarray(centroids, dtype=np.float32)
        super().__init__(model_names, int(centroids.shape[1]))
        K, T = len(centroids), self.n_models
        if np.shape(quality) != (K, T) or np.shape(cost) != (K, T):
            raise ValueError(f"quality and cost must have shape ({K}, {T}), got {np.shape(quality)} and {np.shape(cost)}")
        self.centroids = unit_rows(centroids).astype(np.float32)
        self.quality = np.asarray(quality, dtype=np.float64)
        self.cost = np.asarray(cost, dtype=np.float64)

    scores_are_utilities = True

    def clusters(self, X: np.ndarray) -> np.ndarray:
        return nearest_centroid(X, self.centroids)

    def _logits(self, X, lam):
        k = self.clusters(X)
        return (self.quality[k] - lam * self.cost[k]).astype(np.float32)

    def _state(self):
        return {"centroids": self.centroids, "quality": self.quality, "cost": self.cost}

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, state["centroids"], state["quality"], state["cost"])


class RegionPolicy(ServablePolicy):
    """A regional policy (:mod:`regret_gateway.policy.regions`): each row goes to its nearest ``centroids``
    (R, d) by cosine similarity, and region r to model ``models[r]``, whatever lambda."""

    kind = "regions"

    def __init__(self, model_names: Sequence[str], centroids: np.ndarray, models: np.ndarray) -> None:
        centroids = np.asarray(centroids, dtype=np.float32)
        super().__init__(model_names, int(centroids.shape[1]))
        models = np.asarray(models, dtype=np.int64).reshape(-1)
        if len(models) != len(centroids) or len(models) == 0:
            raise ValueError(f"a regional policy needs one model per region ({len(centroids)}), got {len(models)}")
        if models.min() < 0 or models.max() >= self.n_models:
            raise ValueError(f"region models must index the {self.n_models} models, got {models.tolist()}")
        self.centroids = unit_rows(centroids).astype(np.float32)
        self.models = models

    def _logits(self, X, lam):
        chosen = self.models[nearest_centroid(X, self.centroids)]
        out = np.zeros((len(X), self.n_models), dtype=np.float32)
        out[np.arange(len(X)), chosen] = 1.0
        return out

    def _state(self):
        return {"centroids": self.centroids, "models": [int(m) for m in self.models]}

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, state["centroids"], np.asarray(state["models"], dtype=np.int64))


class PerTierPolicy(ServablePolicy):
    """One policy per tier lambda, each labelled with the candidate it is (``rm-interval``, ``constant`` ...),
    and optionally an ``estimator`` (a policy whose scores are utilities, e.g. R&C's outcome networks) that
    gives every tier its utility estimates for exploration, whatever kind the tier serves."""

    kind = "per-tier"

    def __init__(
        self,
        tiers: Sequence[float],
        policies: Sequence[ServablePolicy],
        labels: Sequence[str],
        estimator: ServablePolicy | None = None,
    ) -> None:
        if not (len(tiers) == len(policies) == len(labels)) or not tiers:
            raise ValueError("a per-tier policy needs one policy and one label per tier")
        order = np.argsort(np.asarray(tiers, dtype=np.float64), kind="stable")
        names = {p.model_names for p in [*policies, *([estimator] if estimator else [])]}
        dims = {p.dim for p in [*policies, *([estimator] if estimator else [])]} - {None}
        if len(names) != 1 or len(dims) > 1:
            raise ValueError("the policies of a per-tier policy must route over the same models and embedding size")
        super().__init__(policies[0].model_names, dims.pop() if dims else None)
        self.tiers = np.asarray(tiers, dtype=np.float64)[order]
        self._tier_values = tuple(float(t) for t in self.tiers)
        self.policies = [policies[i] for i in order]
        self.labels = [str(labels[i]) for i in order]
        self.estimator = estimator

    def policy_for(self, lam: float) -> ServablePolicy:
        tiers = self._tier_values
        j = min(range(len(tiers)), key=lambda i: abs(tiers[i] - lam))  # nearest tier (the lower one on a tie)
        if tiers[0] < lam < tiers[-1] and not _same_tier(tiers[j], lam):
            right = bisect.bisect_left(tiers, lam)
            if self.policies[right - 1] is self.policies[right]:
                return self.policies[right]  # one policy on both sides: it knows what lies between
        return self.policies[j]

    def _logits(self, X, lam):
        return self.policy_for(lam)._logits(X, lam)

    def _utilities(self, X, lam):
        return (self.estimator or self.policy_for(lam))._utilities(X, lam)

    def _both(self, X, lam):
        policy = self.policy_for(lam)
        if self.estimator is None or self.estimator is policy:
            return policy._both(X, lam)  # the tier serves its own estimator (R&C): one pass gives both
        return policy._logits(X, lam), self.estimator._utilities(X, lam)

    def _state(self):
        unique: list[ServablePolicy] = []
        for p in [*self.policies, *([self.estimator] if self.estimator else [])]:
            if not any(p is u for u in unique):
                unique.append(p)  # the estimator is often a tier's own R&C: stored once, like a shared policy

        def index(p: ServablePolicy) -> int:
            return next(i for i, u in enumerate(unique) if u is p)

        return {"tiers": [float(t) for t in self.tiers], "labels": list(self.labels),
                "members": [index(p) for p in self.policies],
                "policies": [u.state() for u in unique],
                "estimator": None if self.estimator is None else index(self.estimator)}  # fmt: skip

    @classmethod
    def _from_state(cls, state, model_names):
        unique = [from_state(sub, model_names) for sub in state["policies"]]
        estimator = None if state.get("estimator") is None else unique[int(state["estimator"])]
        return cls(state["tiers"], [unique[int(i)] for i in state["members"]], state["labels"], estimator)


KINDS: dict[str, type[ServablePolicy]] = {
    cls.kind: cls for cls in (TieredPolicy, OutcomePolicy, ConstantPolicy, ClusterPolicy, RegionPolicy, PerTierPolicy)
}


def from_state(state: dict[str, Any], model_names: Sequence[str] | None = None) -> ServablePolicy:
    """The policy that :meth:`ServablePolicy.state` described (raises on an unknown kind or bad shapes).
    ``model_names`` default to the state's own."""
    kind = state.get("kind")
    if kind not in KINDS:
        raise ValueError(f"unknown policy kind {kind!r}; this gateway serves {sorted(KINDS)}")
    names = tuple(model_names if model_names is not None else state["model_names"])
    if len(names) != int(state["n_models"]):
        raise ValueError(f"the policy has {state['n_models']} outputs but {len(names)} model names")
    return KINDS[kind]._from_state(state, names)
