"""Servable policies: what a published router is, to the gateway.

A servable policy maps an embedding batch and a cost weight lambda to one score per model:
``logits(X, lam) -> (n, T)`` over ``model_names``; the gateway routes to the argmax. Its ``state()`` is a
tree of plain values and numpy arrays (what :mod:`regret_gateway.artifacts` writes as JSON and ``.npz``),
rebuilt with :func:`from_state`. This package is the serving path's whole view of a router and imports
numpy only: no torch, no training code. ``arrays`` holds the weights and numpy forward passes, ``base``
the interface, ``kinds`` the single kinds; the per-tier composite and :func:`from_state` live here.

Routing runs in numpy: a policy holds its trained weights as float32 arrays (:class:`MLPArrays`,
:class:`IntervalArrays`, taken with ``.of(net)`` from the trained torch networks where they are fitted)
and computes its scores with them, one matrix product per layer and only the network the lambda needs.

Kinds:

* ``rm-interval`` (:class:`RMIntervalPolicy`): one policy network per tier lambda and an interval net
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
* ``priced`` (:class:`PricedPolicy`): each model's estimated quality, and its cost as a line in the
  prompt's tokens read from the size feature (:class:`regret_gateway.context.SizeFeature`).
* ``per-tier`` (:class:`PerTierPolicy`): one policy of any kind per tier lambda (what ``retrain``
  publishes: each tier serves the candidate it chose). A lambda equal to a tier's uses that tier's
  policy; between two tiers served by the same policy, that policy; otherwise the nearest tier's.

``utility_estimates(X, lam)``: what exploration reads -- R&C's and RM-Cluster's scores are estimated
utilities; a per-tier policy carries R&C's outcome networks as its ``estimator`` for every tier.
``logits_and_utilities(X, lam)`` gives both with one forward pass where the scores are the utilities.
"""

from __future__ import annotations

import bisect
from typing import Any, Sequence

import numpy as np

from regret_gateway.servable.arrays import IntervalArrays, MLPArrays, gelu, nearest_centroid, unit_rows
from regret_gateway.servable.base import Candidate, ServablePolicy, _same_tier, check_lambda
from regret_gateway.servable.kinds import (
    ClusterPolicy,
    ConstantPolicy,
    OutcomePolicy,
    PricedPolicy,
    RegionPolicy,
    RMIntervalPolicy,
    outcome_heads,
)

__all__ = [
    "Candidate",
    "ClusterPolicy",
    "ConstantPolicy",
    "IntervalArrays",
    "KINDS",
    "MLPArrays",
    "OutcomePolicy",
    "PerTierPolicy",
    "PricedPolicy",
    "RegionPolicy",
    "ServablePolicy",
    "RMIntervalPolicy",
    "check_lambda",
    "from_state",
    "gelu",
    "nearest_centroid",
    "outcome_heads",
    "unit_rows",
]


class PerTierPolicy(ServablePolicy):
    """One policy per tier lambda, each with the :class:`Candidate` it is (``rm-interval``, ``constant:<model>`` ...),
    and optionally an ``estimator`` (a policy whose scores are utilities, e.g. R&C's outcome networks) that
    gives every tier its utility estimates for exploration, whatever kind the tier serves."""

    kind = "per-tier"

    def __init__(
        self,
        tiers: Sequence[float],
        policies: Sequence[ServablePolicy],
        candidates: Sequence[Candidate],
        estimator: ServablePolicy | None = None,
    ) -> None:
        if not (len(tiers) == len(policies) == len(candidates)) or not tiers:
            raise ValueError("a per-tier policy needs one policy and one candidate per tier")
        order = np.argsort(np.asarray(tiers, dtype=np.float64), kind="stable")
        names = {p.model_names for p in [*policies, *([estimator] if estimator else [])]}
        dims = {p.dim for p in [*policies, *([estimator] if estimator else [])]} - {None}
        if len(names) != 1 or len(dims) > 1:
            raise ValueError("the policies of a per-tier policy must route over the same models and embedding size")
        super().__init__(policies[0].model_names, dims.pop() if dims else None)
        self.tiers = np.asarray(tiers, dtype=np.float64)[order]
        self._tier_values = tuple(float(t) for t in self.tiers)
        self.policies = [policies[i] for i in order]
        self.candidates = [candidates[i] for i in order]
        self.estimator = estimator

    @property
    def labels(self) -> list[str]:
        return [c.label for c in self.candidates]

    def candidate_for(self, lam: float) -> Candidate:
        """The candidate of the policy that serves ``lam`` (:meth:`policy_for`)."""
        policy = self.policy_for(lam)
        return self.candidates[next(i for i, p in enumerate(self.policies) if p is policy)]

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

        return {"tiers": [float(t) for t in self.tiers], "candidates": [c.state() for c in self.candidates],
                "members": [index(p) for p in self.policies],
                "policies": [u.state() for u in unique],
                "estimator": None if self.estimator is None else index(self.estimator)}  # fmt: skip

    @classmethod
    def _from_state(cls, state, model_names):
        unique = [from_state(sub, model_names) for sub in state["policies"]]
        estimator = None if state.get("estimator") is None else unique[int(state["estimator"])]
        candidates = [Candidate.from_state(c) for c in state["candidates"]]
        return cls(state["tiers"], [unique[int(i)] for i in state["members"]], candidates, estimator)


KINDS: dict[str, type[ServablePolicy]] = {
    cls.kind: cls
    for cls in (RMIntervalPolicy, OutcomePolicy, ConstantPolicy, ClusterPolicy, RegionPolicy, PricedPolicy, PerTierPolicy)
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
