"""What every router shares: the data it learns from and the small interface it implements.

A router is fitted on a :class:`TrainingData` for a list of lambdas, and ``predict(X, lambdas)`` returns
(L, n) model indices. A router that can be published implements ``to_policy()``: the
:class:`~regret_gateway.servable.ServablePolicy` the gateway serves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from regret_gateway.causal.estimators import CounterfactualScores, Nuisance
from regret_gateway.data import FullFeedback, LoggedFeedback
from regret_gateway.nn.training import TrainConfig
from regret_gateway.servable import ServablePolicy

Lambdas = Sequence[float] | np.ndarray  # cost weights lambda >= 0


@dataclass(frozen=True)
class TrainingData:
    """What a router may learn from: (n, T) counterfactual scores of the training rows, the validation
    rows' scores for early stopping and model selection, and where the scores came from.

    Build it with :meth:`from_logs` (observational data: logged rows and their estimated scores) or
    :meth:`from_full` (full information: the true outcome matrices, for the Full-Feedback reference).

    Attributes:
        X, X_val: (n, d) and (n_val, d) embeddings.
        scores, val_scores: counterfactual quality and cost of every model on those rows.
        model_names: the T models.
        logs, val_logs: the logged rows (None for full-information data).
        nuisance: the fitted nuisance stage (R&C reuses its outcome models).
    """

    X: np.ndarray
    scores: CounterfactualScores
    X_val: np.ndarray
    val_scores: CounterfactualScores
    model_names: tuple[str, ...]
    logs: LoggedFeedback | None = None
    val_logs: LoggedFeedback | None = None
    nuisance: Nuisance | None = None

    @classmethod
    def from_logs(
        cls,
        logs: LoggedFeedback,
        scores: CounterfactualScores,
        val_logs: LoggedFeedback,
        val_scores: CounterfactualScores,
        nuisance: Nuisance | None = None,
    ) -> "TrainingData":
        return cls(logs.X, scores, val_logs.X, val_scores, logs.model_names, logs, val_logs, nuisance)

    @classmethod
    def from_full(cls, full: FullFeedback, full_val: FullFeedback) -> "TrainingData":
        """Every outcome known: the scores are the true quality and cost matrices (no clipping)."""
        return cls(
            full.X,
            CounterfactualScores(full.quality, full.cost, clip=None),
            full_val.X,
            CounterfactualScores(full_val.quality, full_val.cost, clip=None),
            full.model_names,
        )

    @property
    def n_models(self) -> int:
        return len(self.model_names)

    def observed(self, name: str) -> tuple[LoggedFeedback, LoggedFeedback]:
        """(logs, val_logs); raises for full-information data (a router that learns from logged rows)."""
        if self.logs is None or self.val_logs is None:
            raise ValueError(f"{name} learns from logged rows; this training data has none")
        return self.logs, self.val_logs


class Router(ABC):
    """Base router. ``fit`` returns self; ``predict`` refuses an unfitted router.

    ``full_information``: the router is a reference trained on the true outcomes
    (:meth:`TrainingData.from_full`), not on logs.
    """

    name = "router"
    full_information = False

    def __init__(self, *, train: TrainConfig = TrainConfig(), hidden: tuple[int, ...] = (200, 200), random_state: int = 0):
        self.train = train
        self.hidden = hidden
        self.random_state = random_state

    @abstractmethod
    def fit(self, data: TrainingData, lambdas: Lambdas) -> "Router": ...

    @abstractmethod
    def predict(self, X: np.ndarray, lambdas: Lambdas) -> np.ndarray: ...

    def to_policy(self) -> ServablePolicy:
        """The fitted router as a policy the gateway can serve."""
        raise NotImplementedError(f"{self.name} cannot be served by the gateway")

    def _check_fitted(self) -> None:
        if not getattr(self, "fitted_", False):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit() first")


def check_lambdas(lambdas: Lambdas) -> np.ndarray:
    """(L,) float array of finite lambdas >= 0; raises otherwise."""
    lam = np.asarray(list(lambdas), dtype=np.float64)
    if lam.ndim != 1 or lam.size == 0:
        raise ValueError("`lambdas` must be a non-empty list of numbers")
    if not np.all(np.isfinite(lam)) or lam.min() < 0:
        raise ValueError(f"`lambdas` must be finite and >= 0, got {lam.tolist()}")
    return lam


def row_regret(Y: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """(n,) estimated regret of ``actions`` (n,) on (n, T) DR utilities ``Y``, per row."""
    return Y.max(1) - Y[np.arange(len(actions)), actions]


def dr_regret(Y: np.ndarray, actions: np.ndarray) -> float:
    """Mean estimated regret of ``actions`` on ``Y``: how model selection on validation rows compares
    fitted routers."""
    return float(np.mean(row_regret(Y, actions)))
