"""The routers of the paper behind one small interface (:class:`~regret_gateway.policy.router.Router`).

A router is fitted on a :class:`~regret_gateway.policy.router.TrainingData` (counterfactual scores of the
training rows and of the validation rows used for early stopping) for a list of lambdas, and
``predict(X, lambdas)`` returns (L, n) model indices. The registry name -> class is
:mod:`regret_gateway.policy.registry`.

Two families:

* decoupled routers predict quality and cost per model and pick argmax_t A(t) - lambda * C(t)
  (``baseline``, ``r-and-c``, ``carrot-knn``, ``carrot-embednet``): one fit serves every lambda;
* end-to-end policies train one network per lambda (``full-feedback``, ``cf-regression``,
  ``rm-classification``, ``rm-softmax``, and the full-information references ``full-info-regret``,
  ``full-info-regression``), all lambdas stacked and trained together
  (see :mod:`regret_gateway.nn.networks`); ``rm-interval`` lives in :mod:`.rm_interval`.
"""

from __future__ import annotations

import numpy as np
import torch

from regret_gateway.nn import objectives
from regret_gateway.nn.networks import StackedMLP
from regret_gateway.nn.training import train_members
from regret_gateway.policy.router import Lambdas, Router, TrainingData, check_lambdas, dr_regret
from regret_gateway.servable import CandidateKind, OutcomePolicy


# -- decoupled routers --------------------------------------------------------------------------
class DecoupledRouter(Router):
    """Predicts (A, C) per model; routes to argmax_t A(t) - lambda * C(t) for any lambda."""

    def predict_outcomes(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def predict(self, X: np.ndarray, lambdas: Lambdas) -> np.ndarray:
        self._check_fitted()
        A, C = self.predict_outcomes(X)
        lam = check_lambdas(lambdas)
        return np.stack([np.argmax(A - l * C, axis=1) for l in lam])


class _Regressor(DecoupledRouter):
    """One MLP x -> (A(1..T), C(1..T)) trained on masked targets; cost scaled by its mean."""

    def _targets(self, data: TrainingData, val: bool):
        raise NotImplementedError

    def fit(self, data: TrainingData, lambdas: Lambdas) -> "_Regressor":
        T = data.n_models
        self.cost_scale_ = float(np.mean(data.observed(self.name)[0].cost)) or 1.0
        torch.manual_seed(self.random_state)
        net = StackedMLP(1, data.X.shape[1], 2 * T, self.hidden)
        X, Xv = torch.tensor(data.X), torch.tensor(data.X_val)
        (qa, ca, ma), (qv, cv, mv) = self._targets(data, False), self._targets(data, True)

        def loss(x, q, c, m, idx=None):
            if idx is not None:
                x, q, c, m = x[idx], q[idx], c[idx], m[idx]
            out = net(x)[0]
            err = (out[:, :T] - q) ** 2 + (out[:, T:] - c) ** 2
            return ((err * m).sum() / m.sum().clamp(min=1.0)).reshape(1)

        train_members(
            net, len(X), lambda idx: loss(X, qa, ca, ma, idx), lambda: loss(Xv, qv, cv, mv), self.train, seed=self.random_state
        )
        self.net_, self.n_models_, self.fitted_ = net, T, True
        return self

    @torch.no_grad()
    def predict_outcomes(self, X):
        out = self.net_(torch.tensor(np.asarray(X, dtype=np.float32)))[0].numpy().astype(np.float64)
        T = self.n_models_
        return out[:, :T], out[:, T:] * self.cost_scale_


class Baseline(_Regressor):
    """CARROT-style decoupled predictors of quality and cost fitted on the observed rows only (no bias
    correction): the naive way to learn from logs."""

    name = "baseline"

    def _targets(self, data, val):
        logs = data.observed(self.name)[1 if val else 0]
        n, T = logs.n_samples, logs.n_models
        q, c, m = np.zeros((n, T)), np.zeros((n, T)), np.zeros((n, T))
        rows = np.arange(n)
        q[rows, logs.action], c[rows, logs.action], m[rows, logs.action] = logs.quality, logs.cost / self.cost_scale_, 1.0
        return tuple(torch.as_tensor(a, dtype=torch.float32) for a in (q, c, m))


class CarrotEmbedNet(_Regressor):
    """Causal-CARROT EmbedNet: an MLP regressing the doubly robust quality and cost scores of all models."""

    name = "carrot-embednet"

    def _targets(self, data, val):
        s = data.val_scores if val else data.scores
        m = np.ones_like(s.quality)
        return tuple(torch.as_tensor(a, dtype=torch.float32) for a in (s.quality, s.cost / self.cost_scale_, m))


class RandC(DecoupledRouter):
    """R&C: argmax of the nuisance stage's outcome models r_t(x) (regress, then compare)."""

    name = CandidateKind.R_AND_C.value

    def fit(self, data: TrainingData, lambdas: Lambdas) -> "RandC":
        if data.nuisance is None or not hasattr(data.nuisance, "outcome_"):
            raise ValueError("r-and-c needs the fitted nuisance stage in TrainingData.nuisance")
        self.outcome_, self.model_names_, self.fitted_ = data.nuisance.outcome_, data.model_names, True
        return self

    def predict_outcomes(self, X):
        return self.outcome_.predict(X)

    def to_policy(self) -> OutcomePolicy:
        self._check_fitted()
        return self.outcome_.to_policy(self.model_names_)


class CarrotKNN(DecoupledRouter):
    """Causal-CARROT kNN: quality and cost of each model = mean doubly robust score of the k nearest
    logged prompts (cosine similarity); k chosen on validation regret averaged over the lambdas."""

    name = "carrot-knn"

    def __init__(self, *, ks: tuple[int, ...] = (5, 10, 20, 40, 80), **kwargs):
        super().__init__(**kwargs)
        self.ks = ks

    def _neighbour_means(self, X: np.ndarray, k: int):
        q = torch.nn.functional.normalize(torch.tensor(np.asarray(X, dtype=np.float32)), dim=1)
        sims = q @ self.keys_.T
        idx = sims.topk(min(k, self.keys_.shape[0]), dim=1).indices.numpy()
        return self.quality_[idx].mean(1), self.cost_[idx].mean(1)

    def fit(self, data: TrainingData, lambdas: Lambdas) -> "CarrotKNN":
        lam = check_lambdas(lambdas)
        self.keys_ = torch.nn.functional.normalize(torch.tensor(data.X), dim=1)
        self.quality_, self.cost_ = data.scores.quality, data.scores.cost
        regrets = {}
        for k in self.ks:
            A, C = self._neighbour_means(data.X_val, k)
            regrets[k] = float(np.mean([dr_regret(data.val_scores.utility(l), np.argmax(A - l * C, 1)) for l in lam]))
        self.k_, self.fitted_ = min(self.ks, key=lambda k: regrets[k]), True
        return self

    def predict_outcomes(self, X):
        return self._neighbour_means(X, self.k_)


# -- one network per lambda ---------------------------------------------------------------------
class PerLambdaPolicy(Router):
    """One policy network f_lambda(x) -> T logits per lambda; early stopping on validation regret."""

    def _utilities(self, data: TrainingData, lam: np.ndarray, val: bool) -> np.ndarray:
        """(L, n, T) utility targets."""
        scores = data.val_scores if val else data.scores
        return np.stack([scores.utility(l) for l in lam])

    def _loss(self, out: torch.Tensor, Y: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _targets(self, Y: np.ndarray, data: TrainingData, lam: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(Y, dtype=torch.float32)

    def fit(self, data: TrainingData, lambdas: Lambdas) -> "PerLambdaPolicy":
        lam = check_lambdas(lambdas)
        Y_np = self._utilities(data, lam, val=False)
        Yv = torch.as_tensor(self._utilities(data, lam, val=True), dtype=torch.float32)
        target = self._targets(Y_np, data, lam)
        Y = torch.as_tensor(Y_np, dtype=torch.float32)
        X, Xv = torch.tensor(data.X), torch.tensor(data.X_val)
        torch.manual_seed(self.random_state)
        net = StackedMLP(len(lam), X.shape[1], data.n_models, self.hidden)
        result = train_members(
            net,
            len(X),
            lambda idx: self._loss(net(X[idx]), Y[:, idx], target[:, idx]),
            lambda: objectives.regret(Yv, net(Xv)),
            self.train,
            seed=self.random_state,
        )
        self.net_, self.lambdas_, self.fitted_ = net, lam, True
        self.epochs_, self.val_regret_ = result.epochs, result.best_score.numpy()
        return self

    def _members(self, lambdas: Lambdas) -> list[int]:
        members = []
        for l in check_lambdas(lambdas):
            hit = np.flatnonzero(np.isclose(self.lambdas_, l))
            if hit.size == 0:
                raise ValueError(f"{self.name} was trained for lambdas {self.lambdas_.tolist()}, not {l}")
            members.append(int(hit[0]))
        return members

    @torch.no_grad()
    def logits(self, X: np.ndarray, lambdas: Lambdas) -> torch.Tensor:
        """(L, n, T) policy logits for the requested (trained) lambdas."""
        self._check_fitted()
        out = self.net_(torch.tensor(np.asarray(X, dtype=np.float32)))
        return out[self._members(lambdas)]

    def predict(self, X: np.ndarray, lambdas: Lambdas) -> np.ndarray:
        return self.logits(X, lambdas).argmax(-1).numpy()


class RMSoftmax(PerLambdaPolicy):
    """RM-Softmax: minimise the softmax-weighted regret on doubly robust scores (the paper's method)."""

    name = "rm-softmax"

    def __init__(self, *, tau: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        if tau <= 0:
            raise ValueError(f"`tau` must be > 0, got {tau}")
        self.tau = tau

    def _loss(self, out, Y, targets):
        return objectives.softmax_regret(out, Y, self.tau)


class RMClassification(PerLambdaPolicy):
    """RM-Classification: cross-entropy to argmax_t of the doubly robust scores (tie-aware labels)."""

    name = "rm-classification"

    def __init__(self, *, ties: str = "share", **kwargs):
        super().__init__(**kwargs)
        self.ties = ties

    def _tie_cost(self, data: TrainingData) -> np.ndarray:
        """Cost matrix used to break ties (``ties="cheapest"``)."""
        return data.scores.cost

    def _targets(self, Y, data, lam):
        cost = self._tie_cost(data) if self.ties == "cheapest" else None
        return torch.as_tensor(np.stack([objectives.argmax_labels(y, ties=self.ties, cost=cost) for y in Y]), dtype=torch.float32)

    def _loss(self, out, Y, targets):
        return objectives.classification(out, targets)


class FullFeedbackPolicy(RMClassification):
    """Full-Feedback oracle: classification to the true best model (every outcome observed); the paper's
    ceiling for methods trained on logs. Fit it on :meth:`TrainingData.from_full`. Ties in the true
    utility are shared (or broken by cost)."""

    name = "full-feedback"
    full_information = True


class CFRegression(PerLambdaPolicy):
    """CF-Regression: regress the doubly robust utility of every model (MSE), route to the argmax."""

    name = "cf-regression"

    def _loss(self, out, Y, targets):
        return objectives.regression(out, targets)


class FullInfoRegret(Router):
    """Full-information regret reference: RM-Softmax's network and objective on the true utilities of
    every model (fit it on :meth:`TrainingData.from_full`). Unlike Full-Feedback's argmax labels it keeps
    how much each wrong choice costs. The softmax regret is not convex and its optimum depends on the
    sharpness tau (on a generated world tau = 1 stalled at 0.22 validation regret where tau = 10 reached
    0.08), so one network is trained per tau in ``taus`` and each lambda keeps the one with the lowest true
    validation regret -- a reference, so the validation rows' true outcomes may choose it."""

    name = "full-info-regret"
    full_information = True

    def __init__(self, *, taus: tuple[float, ...] = (1.0, 10.0, 100.0), **kwargs):
        super().__init__(**kwargs)
        self.taus = taus

    def fit(self, data: TrainingData, lambdas: Lambdas) -> "FullInfoRegret":
        lam = check_lambdas(lambdas)
        kw = {"train": self.train, "hidden": self.hidden, "random_state": self.random_state}
        self.fits_ = [RMSoftmax(tau=tau, **kw).fit(data, lam) for tau in self.taus]
        regret = np.stack([f.val_regret_ for f in self.fits_])  # (taus, L)
        self.choice_, self.fitted_ = regret.argmin(0), True
        return self

    def predict(self, X: np.ndarray, lambdas: Lambdas) -> np.ndarray:
        self._check_fitted()
        lam = check_lambdas(lambdas)
        members = self.fits_[0]._members(lam)  # every fit has the same lambdas; raises for an untrained one
        return np.stack([self.fits_[int(self.choice_[m])].predict(X, [l])[0] for l, m in zip(lam, members)])


class FullInfoRegression(CFRegression):
    """Full-information regression reference: the same network regressing every model's true utility
    (MSE), routed to the argmax."""

    name = "full-info-regression"
    full_information = True
