"""The servable kinds: RM-Interval, R&C, the constant, RM-Cluster, the regional policy, the priced policy; and
:func:`from_state`, which rebuilds any of them from its ``state()``."""

from __future__ import annotations

import bisect
from typing import Any, Sequence

import numpy as np

from regret_gateway.context import SizeFeature
from regret_gateway.servable.arrays import IntervalArrays, MLPArrays, nearest_centroid, unit_rows
from regret_gateway.servable.policy import CandidateKind, ServablePolicy, _same_tier


class RMIntervalPolicy(ServablePolicy):
    """RM-Interval at serving time: tier networks ``tier_arrays`` (m members) and ``intervals`` (m - 1)."""

    kind = "rm-interval"
    candidate = CandidateKind.RM_INTERVAL

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
    candidate = CandidateKind.R_AND_C

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

    def _choices(self, X, lams):
        quality, cost = outcome_heads(self.arrays.forward(X), self.cost_scale)  # one forward pass for every lambda
        return np.stack([(quality - lam * cost).argmax(-1) for lam in lams])

    def _state(self):
        return {"weights": self.arrays.state(), "cost_scale": self.cost_scale}

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, MLPArrays.from_state(state["weights"]), np.asarray(state["cost_scale"], dtype=np.float64))


class ConstantPolicy(ServablePolicy):
    """Every request to one model: ``model`` at every lambda."""

    kind = "constant"
    candidate = CandidateKind.CONSTANT

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


class ClusterPolicy(ServablePolicy):
    """RM-Cluster at serving time: each row goes to its nearest ``centroids`` (K, d) by cosine similarity,
    and within cluster k to argmax_t quality[k, t] - lam * cost[k, t] ((K, T) estimated means)."""

    kind = "cluster"
    candidate = CandidateKind.RM_CLUSTER

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

    def _choices(self, X, lams):
        k = self.clusters(X)  # one assignment for every lambda; each cluster's choice from its (T,) means
        return np.stack([(self.quality - lam * self.cost).astype(np.float32).argmax(-1)[k] for lam in lams])

    def _state(self):
        return {"centroids": self.centroids, "quality": self.quality, "cost": self.cost}

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, state["centroids"], state["quality"], state["cost"])


class RegionPolicy(ServablePolicy):
    """A regional policy (:mod:`regret_gateway.policy.regions`): each row goes to its nearest ``centroids``
    (R, d) by cosine similarity, and region r to model ``models[r]``, whatever lambda. With ``reach``, a
    row whose best score (the row times a unit centroid) is below it is in no region and goes to model
    ``default``: the regions of context keys (:func:`regret_gateway.policy.regions.key_regions`) reach only
    the keys they were fitted on, and a new key is served the baseline."""

    kind = "regions"
    candidate = CandidateKind.REGIONS

    def __init__(
        self, model_names: Sequence[str], centroids: np.ndarray, models: np.ndarray, *, reach: float | None = None,
        default: int | None = None,
    ) -> None:  # fmt: skip
        centroids = np.asarray(centroids, dtype=np.float32)
        super().__init__(model_names, int(centroids.shape[1]))
        models = np.asarray(models, dtype=np.int64).reshape(-1)
        if len(models) != len(centroids) or len(models) == 0:
            raise ValueError(f"a regional policy needs one model per region ({len(centroids)}), got {len(models)}")
        if models.min() < 0 or models.max() >= self.n_models:
            raise ValueError(f"region models must index the {self.n_models} models, got {models.tolist()}")
        if (reach is None) != (default is None) or (default is not None and not 0 <= default < self.n_models):
            raise ValueError(f"a regional policy's reach needs a default model among the {self.n_models}, got {default}")
        self.centroids = unit_rows(centroids).astype(np.float32)
        self.models = models
        self.reach: float | None = None if reach is None else float(reach)
        self.default: int | None = None if default is None else int(default)

    def _logits(self, X, lam):
        scores = np.asarray(X, dtype=np.float32) @ self.centroids.T
        chosen = self.models[np.argmax(scores, axis=1)]
        if self.reach is not None:
            chosen = np.where(scores.max(axis=1) >= self.reach, chosen, self.default)
        out = np.zeros((len(X), self.n_models), dtype=np.float32)
        out[np.arange(len(X)), chosen] = 1.0
        return out

    def _state(self):
        state = {"centroids": self.centroids, "models": [int(m) for m in self.models]}
        if self.reach is not None:
            state |= {"reach": self.reach, "default": self.default}
        return state

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, state["centroids"], np.asarray(state["models"], dtype=np.int64),
                   reach=state.get("reach"), default=state.get("default"))  # fmt: skip


class PricedPolicy(ServablePolicy):
    """Each model's estimated ``quality`` (T,), and its cost as a line in the prompt's tokens (``fixed`` and
    ``per_token``, (T,) each; :mod:`regret_gateway.prices`), the tokens read from the size feature the rows
    carry last (:class:`regret_gateway.context.SizeFeature` of ``size_weight``): argmax_t quality[t] -
    lam * (fixed[t] + per_token[t] * tokens). The quality does not depend on the prompt; its price does, so
    at a high lambda a long prompt goes to a cheaper model than a short one."""

    kind = "priced"
    candidate = CandidateKind.PRICED
    scores_are_utilities = True

    def __init__(self, model_names: Sequence[str], quality, fixed, per_token, size_weight: float, dim: int | None = None) -> None:
        super().__init__(model_names, dim)
        self.quality, self.fixed, self.per_token = (
            np.asarray(v, dtype=np.float64).reshape(-1) for v in (quality, fixed, per_token)
        )
        if not (len(self.quality) == len(self.fixed) == len(self.per_token) == self.n_models):
            raise ValueError(f"a priced policy needs one quality, fixed cost and price per model ({self.n_models})")
        self.size = SizeFeature(float(size_weight))

    def _logits(self, X, lam):
        tokens = self.size.tokens(X)[:, None]
        return (self.quality[None, :] - lam * (self.fixed[None, :] + self.per_token[None, :] * tokens)).astype(np.float32)

    def _state(self):
        return {"quality": self.quality, "fixed": self.fixed, "per_token": self.per_token, "size_weight": self.size.weight}

    @classmethod
    def _from_state(cls, state, model_names):
        return cls(model_names, state["quality"], state["fixed"], state["per_token"], float(state["size_weight"]),
                   None if state["d_in"] is None else int(state["d_in"]))  # fmt: skip


KINDS: dict[str, type[ServablePolicy]] = {
    cls.kind: cls for cls in (RMIntervalPolicy, OutcomePolicy, ConstantPolicy, ClusterPolicy, RegionPolicy, PricedPolicy)
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
