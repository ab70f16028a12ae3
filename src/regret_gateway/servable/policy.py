"""The servable policy interface: ``logits(X, lam)``, utility estimates for exploration, ``state()``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, ClassVar, Sequence

import numpy as np


def check_lambda(lam: float) -> float:
    lam = float(lam)
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"lambda must be finite and >= 0, got {lam}")
    return lam


def _same_tier(tier: float, lam: float) -> bool:
    """``lam`` is the tier's lambda, to numpy's ``isclose`` tolerance (in plain floats: isclose costs tens of
    microseconds a call, on every routed request's path)."""
    return abs(tier - lam) <= 1e-8 + 1e-5 * abs(lam)


class ServablePolicy(ABC):
    """Base of the servable policies; a subclass implements :meth:`_logits`, :meth:`_state`, :meth:`_from_state`
    (numpy in, numpy out), and :meth:`_utilities` where its scores can be read as utilities.

    Attributes:
        model_names: the T models, one per output column.
        dim: embedding size the policy reads (None: it reads no embedding).
    """

    kind: ClassVar[str] = "base"  # its artifact format (servable/kinds.py)
    candidate: ClassVar[CandidateKind | None] = None  # the candidate it serves as
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

    def choices(self, X: np.ndarray, lams: Sequence[float]) -> np.ndarray:
        """(L, n) :meth:`choose` at each of ``lams``: what does not depend on lambda (the outcome networks'
        forward pass, the nearest centroid) computed once where the kind allows (:meth:`_choices`)."""
        X, lams = self._input(X), [check_lambda(lam) for lam in lams]
        return self._choices(X, lams) if lams else np.zeros((0, len(X)), dtype=np.int64)

    def _choices(self, X: np.ndarray, lams: list[float]) -> np.ndarray:
        """(L, n) for at least one lambda."""
        return np.stack([self._logits(X, lam).argmax(-1) for lam in lams])

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

    @abstractmethod
    def _logits(self, X: np.ndarray, lam: float) -> np.ndarray: ...

    @abstractmethod
    def _state(self) -> dict[str, Any]: ...

    @classmethod
    @abstractmethod
    def _from_state(cls, state: dict[str, Any], model_names: tuple[str, ...]) -> "ServablePolicy": ...


class CandidateKind(str, Enum):
    """What kind of policy a tier can serve: the one type the gate, the offline bench and the reports name
    candidates by (a ``str``: it compares, hashes and serialises as its value)."""

    RM_INTERVAL = "rm-interval"  # the paper's RM-Interval
    R_AND_C = "r-and-c"  # the outcome models' argmax
    RM_CLUSTER = "rm-cluster"  # regret minimisation over embedding clusters
    CONSTANT = "constant"  # one model: the safe default
    REGIONS = "regions"  # the constant, except in the regions the logs prove another model better
    PRICED = "priced"  # the best constant with each request priced by its prompt's size

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


LEARNED: tuple[CandidateKind, ...] = (CandidateKind.RM_INTERVAL, CandidateKind.R_AND_C, CandidateKind.RM_CLUSTER)
SAFE: tuple[CandidateKind, ...] = (CandidateKind.CONSTANT, CandidateKind.REGIONS)


@dataclass(frozen=True)
class Candidate:
    """What a tier serves, as retrain chose and published it: ``kind`` -- a learned router (``rm-interval``,
    ``r-and-c``, ``rm-cluster``) or a safe default (``constant``: one model; ``regions``: that model except
    in the regions of prompt space the logs prove) -- the safe default's ``model``, and the ``version`` of
    the artifact it is served from (None: the one being built)."""

    kind: CandidateKind
    model: str | None = None
    version: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", CandidateKind(self.kind))
        except ValueError:
            raise ValueError(
                f"unknown candidate kind {self.kind!r}; one of {', '.join(k.value for k in CandidateKind)}"
            ) from None
        if (self.model is None) == (self.kind in SAFE):
            raise ValueError(f"a {self.kind!r} candidate {'needs' if self.model is None else 'has no'} model")

    @property
    def safe(self) -> bool:
        """A safe default: re-derived by every retrain, never an incumbent to protect."""
        return self.kind in SAFE

    @property
    def label(self) -> str:
        """``kind``, ``kind:model`` for a safe default, then `` (version)`` where it has one: how reports name it."""
        base = self.kind if self.model is None else f"{self.kind}:{self.model}"
        return base if self.version is None else f"{base} ({self.version})"

    def of_version(self, version: str | None) -> "Candidate":
        return replace(self, version=version)

    def state(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "model": self.model}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Candidate":
        return cls(CandidateKind(str(state["kind"])), None if state.get("model") is None else str(state["model"]))
