"""Servable policies: what a published router is, to the gateway.

A servable policy maps an embedding batch and a cost weight lambda to one score per model:
``logits(X, lam) -> (n, T)`` over ``model_names``; the gateway routes to the argmax. Its ``state()`` is a
tree of plain values and numpy arrays (what :mod:`regret_gateway.artifacts` writes as JSON and ``.npz``),
rebuilt with :func:`from_state`. This package is the serving path's whole view of a router and imports
numpy only: no torch, no training code. ``arrays`` holds the weights and numpy forward passes, ``base``
the interface, ``kinds`` the kinds and :func:`from_state`, ``published`` the bundle of tiers by name.

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
What ``retrain`` publishes is a :class:`PublishedRouter` (``published``): each tier by its name, the policy
of any kind it serves and the :class:`Candidate` that is, R&C's outcome networks as the ``estimator`` of
every tier's utility estimates, and the budget ladders.

``utility_estimates(X, lam)``: what exploration reads -- R&C's and RM-Cluster's scores are estimated
utilities.
``logits_and_utilities(X, lam)`` gives both with one forward pass where the scores are the utilities.
"""

from __future__ import annotations

from regret_gateway.servable.arrays import IntervalArrays, MLPArrays, gelu, nearest_centroid, unit_rows
from regret_gateway.servable.kinds import (
    KINDS,
    ClusterPolicy,
    ConstantPolicy,
    OutcomePolicy,
    PricedPolicy,
    RegionPolicy,
    RMIntervalPolicy,
    from_state,
    outcome_heads,
)
from regret_gateway.servable.policy import LEARNED, SAFE, Candidate, CandidateKind, ServablePolicy, check_lambda
from regret_gateway.servable.published import PublishedRouter, ServedTier, candidate_of

__all__ = [
    "LEARNED",
    "SAFE",
    "Candidate",
    "CandidateKind",
    "ClusterPolicy",
    "ConstantPolicy",
    "IntervalArrays",
    "KINDS",
    "MLPArrays",
    "OutcomePolicy",
    "PricedPolicy",
    "PublishedRouter",
    "RegionPolicy",
    "ServablePolicy",
    "RMIntervalPolicy",
    "ServedTier",
    "candidate_of",
    "check_lambda",
    "from_state",
    "gelu",
    "nearest_centroid",
    "outcome_heads",
    "unit_rows",
]
