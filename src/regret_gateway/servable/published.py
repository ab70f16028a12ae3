"""What retrain publishes and the gateway serves: each tier by its name, with the policy it serves and the
:class:`Candidate` that policy is; the utility estimator exploration reads; the budget ladders.

A tier is an identity, not a lambda: two tiers of one lambda each serve their own policy, and a tier the
bundle does not hold is not served by a neighbour's policy (the gateway sends it to its fallback). A
tier's policy is asked at the lambda the caller gives (the gateway: the tier's configured one), default
the lambda it was chosen for (:attr:`ServedTier.lam`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from regret_gateway.budgets.ladder import BudgetLadders
from regret_gateway.servable.kinds import ConstantPolicy, from_state
from regret_gateway.servable.policy import Candidate, ServablePolicy, check_lambda


@dataclass(frozen=True)
class ServedTier:
    """One tier of a published router: the policy it serves, what that policy is, the lambda it was chosen for,
    and its ``contenders``: the models retrain's logs could not show to be worse, as the tier's constant,
    than what it serves, the highest upper bound of its gain first: the tier's exploration spends on the first
    (gateway/exploration.py)."""

    lam: float
    candidate: Candidate
    policy: ServablePolicy
    contenders: tuple[str, ...] = ()


def candidate_of(policy: ServablePolicy) -> Candidate:
    """The candidate a bare policy is: the constant of its model, else a learned router of its kind."""
    if policy.candidate is None:
        raise ValueError(f"a {policy.kind!r} policy is no candidate a tier can serve")
    return Candidate(policy.candidate, policy.model if isinstance(policy, ConstantPolicy) else None)


class PublishedRouter:
    """Tiers by name -> :class:`ServedTier`, over one set of models and one embedding size; ``estimator``: a
    policy whose scores are utilities (retrain's R&C outcome networks), every tier's utility estimates for
    exploration whatever it serves; ``ladders``: the budget ladders retrain valued for budgeted teams."""

    def __init__(self, tiers: Mapping[str, ServedTier], estimator: ServablePolicy | None = None,
                 ladders: BudgetLadders | None = None) -> None:  # fmt: skip
        if not tiers:
            raise ValueError("a published router needs at least one tier")
        policies = [t.policy for t in tiers.values()] + ([estimator] if estimator is not None else [])
        names = {p.model_names for p in policies}
        dims = {p.dim for p in policies} - {None}
        if len(names) != 1 or len(dims) > 1:
            raise ValueError("the policies of a published router must route over the same models and embedding size")
        self.tiers: dict[str, ServedTier] = {str(k): replace(v, lam=check_lambda(v.lam)) for k, v in tiers.items()}
        self.model_names: tuple[str, ...] = names.pop()
        unknown = {m for t in self.tiers.values() for m in t.contenders} - set(self.model_names)
        if unknown:
            raise ValueError(f"a tier's contenders must be models the router routes over, got {sorted(unknown)}")
        self.dim: int | None = dims.pop() if dims else None
        self.estimator = estimator
        self.ladders = ladders or BudgetLadders()

    @classmethod
    def serving(cls, policy: ServablePolicy, tiers: Mapping[str, float], candidate: Candidate | None = None,
                estimator: ServablePolicy | None = None) -> "PublishedRouter":  # fmt: skip
        """Every tier of ``tiers`` (name -> lambda) served by one ``policy`` (as ``candidate``, default
        :func:`candidate_of`)."""
        served = candidate or candidate_of(policy)
        return cls({name: ServedTier(lam, served, policy) for name, lam in tiers.items()}, estimator)

    def with_ladders(self, ladders: BudgetLadders) -> "PublishedRouter":
        return PublishedRouter(self.tiers, self.estimator, ladders)

    @property
    def n_models(self) -> int:
        return len(self.model_names)

    def tier(self, name: str) -> ServedTier | None:
        """The tier ``name`` (None: the bundle does not hold it)."""
        return self.tiers.get(name)

    def _served(self, name: str) -> ServedTier:
        served = self.tiers.get(name)
        if served is None:
            raise KeyError(f"the published router holds no tier {name!r} (it holds {sorted(self.tiers)})")
        return served

    def logits(self, name: str, X: np.ndarray, lam: float | None = None) -> np.ndarray:
        """(n, T) tier ``name``'s scores at ``lam`` (default: the tier's own)."""
        served = self._served(name)
        return served.policy.logits(X, served.lam if lam is None else lam)

    def choose(self, name: str, X: np.ndarray, lam: float | None = None) -> np.ndarray:
        """(n,) tier ``name``'s choice per row."""
        return self.logits(name, X, lam).argmax(-1)

    def utility_estimates(self, X: np.ndarray, lam: float, name: str | None = None) -> np.ndarray | None:
        """(n, T) estimated utilities at ``lam``: the estimator's, else tier ``name``'s policy's (None where
        neither has them)."""
        if self.estimator is not None:
            return self.estimator.utility_estimates(X, lam)
        return None if name is None else self._served(name).policy.utility_estimates(X, lam)

    def logits_and_utilities(self, name: str, X: np.ndarray, lam: float | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Tier ``name``'s scores and the utility estimates exploration reads, one forward pass where the
        tier serves the estimator itself."""
        served = self._served(name)
        lam = served.lam if lam is None else lam
        if self.estimator is None or self.estimator is served.policy:
            return served.policy.logits_and_utilities(X, lam)
        return served.policy.logits(X, lam), self.estimator.utility_estimates(X, lam)

    def state(self) -> dict[str, Any]:
        """Plain values and numpy arrays: each distinct policy once (tiers that serve one policy share it, as
        the estimator often is a tier's own R&C)."""
        unique: list[ServablePolicy] = []
        for p in [*(t.policy for t in self.tiers.values()), *([self.estimator] if self.estimator else [])]:
            if not any(p is u for u in unique):
                unique.append(p)

        def index(p: ServablePolicy) -> int:
            return next(i for i, u in enumerate(unique) if u is p)

        return {
            "tiers": {name: {"lam": t.lam, "candidate": t.candidate.state(), "policy": index(t.policy),
                             "contenders": list(t.contenders)} for name, t in self.tiers.items()},
            "policies": [u.state() for u in unique],
            "estimator": None if self.estimator is None else index(self.estimator),
            "ladders": self.ladders.to_json(),
        }  # fmt: skip

    @classmethod
    def from_state(cls, state: Mapping[str, Any], model_names: Sequence[str] | None = None) -> "PublishedRouter":
        """The router :meth:`state` described (raises on bad shapes or an unknown policy kind)."""
        unique = [from_state(sub, model_names) for sub in state["policies"]]
        tiers = {
            str(name): ServedTier(
                float(t["lam"]),
                Candidate.from_state(t["candidate"]),
                unique[int(t["policy"])],
                tuple(str(m) for m in t.get("contenders", ())),
            )
            for name, t in state["tiers"].items()
        }
        estimator = None if state.get("estimator") is None else unique[int(state["estimator"])]
        return cls(tiers, estimator, BudgetLadders.from_json(state.get("ladders") or {}))
