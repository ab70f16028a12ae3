"""Servable policies: what a published router is, to the gateway.

A servable policy maps an embedding batch and a cost weight lambda to one score per model:
``logits(X, lam) -> (n, T)`` over ``model_names``; the gateway routes to the argmax. It can be saved as
plain tensors and values (``state()``, loadable with ``torch.load(weights_only=True)``) and rebuilt with
:func:`from_state`. This module is the serving path's whole view of a router: it imports torch and
:mod:`regret_gateway.nn.networks` only, never the training code.

Routing runs in numpy: a policy keeps a snapshot of its trained weights as float32 arrays
(:class:`MLPArrays`, taken when the policy is built from its trained networks) and computes its scores
with them, one matrix product per layer and only the network the lambda needs; torch is used to save and
load the weights, never per request.

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
import torch

from regret_gateway.nn.networks import IntervalNets, StackedMLP


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


class MLPArrays:
    """A :class:`StackedMLP`'s weights as float32 arrays, and its forward pass in numpy.

    ``forward(X)`` -> (M, n, d_out) for X (n, d_in); ``forward(X, m)`` -> (n, d_out), member ``m`` alone."""

    def __init__(self, net: StackedMLP) -> None:
        self.weights = [w.detach().cpu().numpy().astype(np.float32) for w in net.weights]  # (M, in, out)
        self.biases = [b.detach().cpu().numpy().astype(np.float32) for b in net.biases]  # (M, 1, out)

    def forward(self, X: np.ndarray, member: int | None = None) -> np.ndarray:
        h = X
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w + b if member is None else h @ w[member] + b[member]
            if i < last:
                h = gelu(h)
        return h


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
        """Tensors and plain values only (``torch.load(weights_only=True)`` reads them back)."""
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


def interval_ends(tier_net: StackedMLP, X: torch.Tensor) -> torch.Tensor:
    """(K, n, 2T) logits of the left and right tier of each of the K = m - 1 intervals (no gradient)."""
    with torch.no_grad():
        tier_logits = tier_net(X)  # (m, n, T)
    return torch.cat([tier_logits[:-1], tier_logits[1:]], dim=-1)


class TieredPolicy(ServablePolicy):
    """RM-Interval at serving time: tier networks ``tier_net`` (m members) and ``intervals`` (m - 1)."""

    kind = "rm-interval"

    def __init__(
        self,
        model_names: Sequence[str],
        tiers: Sequence[float] | np.ndarray,
        tier_net: StackedMLP,
        intervals: IntervalNets | None,
        *,
        tau: float = 1.0,
        interval_tau: float = 10.0,
    ) -> None:
        super().__init__(model_names, tier_net.d_in)
        self.tiers = np.asarray(tiers, dtype=np.float64)
        self._tier_values = tuple(float(t) for t in self.tiers)
        if tier_net.n_members != len(self.tiers) or tier_net.d_out != self.n_models:
            raise ValueError(
                f"tier network has {tier_net.n_members} members x {tier_net.d_out} outputs, "
                f"expected {len(self.tiers)} tiers x {self.n_models} models"
            )
        if len(self.tiers) > 1 and intervals is None:
            raise ValueError("more than one tier needs the interval networks between them")
        self.tier_net, self.intervals = tier_net.eval(), None if intervals is None else intervals.eval()
        self.tau, self.interval_tau = tau, interval_tau
        self._tier_arrays = MLPArrays(tier_net)
        self._interval_arrays = None
        if intervals is not None:  # g(s) = GELU(s * g_weight + g_bias); out = (ends + g) @ out_weight + out_bias
            self._interval_arrays = tuple(
                p.detach().cpu().numpy().astype(np.float32)
                for p in (intervals.g_weight, intervals.g_bias, intervals.out_weight, intervals.out_bias)
            )

    def _logits(self, X: np.ndarray, lam: float) -> np.ndarray:
        tiers = self._tier_values
        exact = next((j for j, t in enumerate(tiers) if _same_tier(t, lam)), None)
        if exact is not None or lam <= tiers[0] or lam >= tiers[-1]:
            j = exact if exact is not None else (0 if lam <= tiers[0] else len(tiers) - 1)
            return self._tier_arrays.forward(X, j)
        j = bisect.bisect_left(tiers, lam) - 1  # tiers[j] < lam < tiers[j+1]
        s = np.float32((lam - tiers[j]) / (tiers[j + 1] - tiers[j]))
        assert self._interval_arrays is not None
        g_weight, g_bias, out_weight, out_bias = self._interval_arrays
        ends = np.concatenate([self._tier_arrays.forward(X, j), self._tier_arrays.forward(X, j + 1)], axis=-1)
        return (ends + gelu(s * g_weight[j] + g_bias[j])) @ out_weight[j] + out_bias[j]

    def _state(self) -> dict[str, Any]:
        return {
            "tiers": [float(t) for t in self.tiers],
            "hidden": list(self.tier_net.hidden),
            "tau": self.tau,
            "interval_tau": self.interval_tau,
            "policies": self.tier_net.state_dict(),
            "intervals": None if self.intervals is None else self.intervals.state_dict(),
        }

    @classmethod
    def _from_state(cls, state, model_names):
        tiers = [float(t) for t in state["tiers"]]
        net = StackedMLP(len(tiers), int(state["d_in"]), int(state["n_models"]), tuple(int(h) for h in state["hidden"]))
        net.load_state_dict(state["policies"])
        intervals = None
        if state["intervals"] is not None:
            intervals = IntervalNets(len(tiers) - 1, int(state["n_models"]))
            intervals.load_state_dict(state["intervals"])
        return cls(model_names, tiers, net, intervals, tau=float(state["tau"]), interval_tau=float(state["interval_tau"]))


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

    def __init__(self, model_names: Sequence[str], net: StackedMLP, cost_scale: np.ndarray) -> None:
        super().__init__(model_names, net.d_in)
        if net.n_members != self.n_models or net.d_out != 2:
            raise ValueError(f"outcome networks must be {self.n_models} members x 2 outputs, got {net.n_members} x {net.d_out}")
        self.net, self.cost_scale = net.eval(), np.asarray(cost_scale, dtype=np.float64)
        self._arrays = MLPArrays(net)

    scores_are_utilities = True

    def _logits(self, X, lam):
        quality, cost = outcome_heads(self._arrays.forward(X), self.cost_scale)
        return quality - lam * cost

    def _state(self):
        return {
            "hidden": list(self.net.hidden),
            "weights": self.net.state_dict(),
            "cost_scale": torch.as_tensor(self.cost_scale, dtype=torch.float64),
        }

    @classmethod
    def _from_state(cls, state, model_names):
        net = StackedMLP(int(state["n_models"]), int(state["d_in"]), 2, tuple(int(h) for h in state["hidden"]))
        net.load_state_dict(state["weights"])
        return cls(model_names, net, state["cost_scale"].numpy())


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
        return {"centroids": torch.as_tensor(self.centroids), "quality": torch.as_tensor(self.quality),
                "cost": torch.as_tensor(self.cost)}  # fmt: skip

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, state["centroids"].numpy(), state["quality"].numpy(), state["cost"].numpy())


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
        return {"centroids": torch.as_tensor(self.centroids), "models": [int(m) for m in self.models]}

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, state["centroids"].numpy(), np.asarray(state["models"], dtype=np.int64))


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
    ``model_names`` default to the state's own; states written before kinds existed are RM-Interval."""
    kind = state.get("kind", TieredPolicy.kind)
    if kind not in KINDS:
        raise ValueError(f"unknown policy kind {kind!r}; this gateway serves {sorted(KINDS)}")
    names = tuple(model_names if model_names is not None else state["model_names"])
    if len(names) != int(state["n_models"]):
        raise ValueError(f"the policy has {state['n_models']} outputs but {len(names)} model names")
    return KINDS[kind]._from_state(state, names)
