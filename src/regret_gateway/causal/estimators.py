"""Counterfactual outcome estimates from logs: DM, IPW and doubly robust (DR) scores.

For each logged row i and every model t the estimators fill in an (n, T) matrix, separately for quality
and cost (so the utility for any lambda comes from one fit):

* DM:  Y_i(t) = r_t(x_i)
* IPW: Y_i(t) = y_i * w_i(t)
* DR:  Y_i(t) = (y_i - r_t(x_i)) * w_i(t) + r_t(x_i)              (Dudik et al. 2011)

with importance weights w_i(t) = 1[t_i = t] / p(t_i | x_i). Variants (issue 7 study):
``max_weight`` caps w (clipping on the importance weight), ``self_normalize`` divides each column of w by
its mean (SNIPS-style), ``correction`` in [0, 1] shrinks DR toward DM (1 = DR, 0 = DM).

The paper clips each column of the utility matrix Y^lambda to its [5th, 95th] percentile; that happens in
:meth:`CounterfactualScores.utility` so it applies after quality and cost are combined.

:class:`Nuisance` is the nuisance stage (EconML's DRLearner split): propensity + outcome models, with
optional k-fold cross-fitting.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from regret_gateway.causal.outcome import OutcomeModel
from regret_gateway.causal.propensity import LoggedPropensity, PropensityModel
from regret_gateway.causal.stats import cross_fit_splits, dr_term, prompt_groups
from regret_gateway.data import LoggedFeedback


@dataclass(frozen=True)
class CounterfactualScores:
    """Estimated (n, T) quality and cost of every model on every logged prompt."""

    quality: np.ndarray
    cost: np.ndarray
    clip: tuple[float, float] | None = (5.0, 95.0)
    clip_scope: str = "column"  # "column" (paper): per-model percentiles; "global": one range for all

    def utility(self, lam: float) -> np.ndarray:
        """(n, T) estimated utility A - lambda * C, clipped to its [lo, hi] percentiles (per column or
        over the whole matrix)."""
        Y = self.quality - lam * self.cost
        if self.clip is None or len(Y) == 0:
            return Y
        lo, hi = np.percentile(Y, self.clip, axis=0 if self.clip_scope == "column" else None)
        return np.clip(Y, lo, hi)

    def subset(self, index: np.ndarray) -> "CounterfactualScores":
        return CounterfactualScores(self.quality[index], self.cost[index], self.clip, self.clip_scope)

    def concat(self, *others: "CounterfactualScores") -> "CounterfactualScores":
        """These rows followed by those of ``others`` (same models; this object's clip settings)."""
        parts = (self, *others)
        return CounterfactualScores(
            np.concatenate([p.quality for p in parts]), np.concatenate([p.cost for p in parts]), self.clip, self.clip_scope
        )

    def best_constant(self, lam: float) -> int:
        """The model with the highest mean estimated utility A - lambda * C (unclipped: the mean of DR scores
        is the unbiased value of always choosing that model) -- the fixed choice from these rows."""
        return int(np.argmax((self.quality - lam * self.cost).mean(0)))


def _check_propensity(propensity: np.ndarray, n: int) -> np.ndarray:
    p = np.asarray(propensity, dtype=np.float64)
    if p.shape != (n,):
        raise ValueError(f"`propensity` must have shape ({n},), got {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("`propensity` must be finite")
    if p.min() <= 0.0 or p.max() > 1.0:
        raise ValueError(f"`propensity` must be in (0, 1], got min={p.min():.6g}, max={p.max():.6g}")
    return p


class ScoreEstimator(ABC):
    """Base of the counterfactual score estimators; a subclass overrides :meth:`_combine`.

    Args:
        clip: percentiles the utility is clipped to (paper: (5, 95)); None disables.
        clip_scope: ``"column"`` (paper: each model's column to its own percentiles) or ``"global"``
            (one range for the whole matrix; per-column bounds favour rarely-logged models, whose
            large 1/p pushes their upper percentile up).
        max_weight: cap on the importance weight 1/p (None: no cap).
        self_normalize: divide each column of the weights by its mean.
    """

    name = "base"

    def __init__(
        self,
        *,
        clip: tuple[float, float] | None = (5.0, 95.0),
        clip_scope: str = "column",
        max_weight: float | None = None,
        self_normalize: bool = False,
    ) -> None:
        if clip_scope not in ("column", "global"):
            raise ValueError(f"`clip_scope` must be 'column' or 'global', got {clip_scope!r}")
        if clip is not None and not (0.0 <= clip[0] < clip[1] <= 100.0):
            raise ValueError(f"`clip` must be percentiles 0 <= lo < hi <= 100, got {clip}")
        if max_weight is not None and max_weight < 1.0:
            raise ValueError(f"`max_weight` must be >= 1 (a weight is 1/p >= 1), got {max_weight}")
        self.clip = clip
        self.clip_scope = clip_scope
        self.max_weight = max_weight
        self.self_normalize = self_normalize

    def weights(self, action: np.ndarray, propensity: np.ndarray, n_models: int) -> np.ndarray:
        """(n, T) importance weights w_i(t) = 1[t_i = t] / p_i, with the configured cap / normalisation."""
        n = len(action)
        p = _check_propensity(propensity, n)
        w = np.zeros((n, n_models))
        inv = 1.0 / p
        if self.max_weight is not None:
            inv = np.minimum(inv, self.max_weight)
        w[np.arange(n), action] = inv
        if self.self_normalize:
            mean = w.mean(axis=0)
            w = np.divide(w, mean, out=np.zeros_like(w), where=mean > 0)
        return w

    @abstractmethod
    def _combine(self, observed: np.ndarray, predicted: np.ndarray | None, w: np.ndarray | None) -> np.ndarray: ...

    def estimate(
        self,
        logs: LoggedFeedback,
        propensity: np.ndarray | None,
        predicted_quality: np.ndarray | None,
        predicted_cost: np.ndarray | None,
    ) -> CounterfactualScores:
        """Scores for every row of ``logs``.

        Args:
            propensity: (n,) p(t_i | x_i) of the logged action (logged or estimated).
            predicted_quality, predicted_cost: (n, T) outcome-model predictions r_t(x_i).
        """
        n, T = logs.n_samples, logs.n_models
        for name, arr in (("predicted_quality", predicted_quality), ("predicted_cost", predicted_cost)):
            if arr is not None and np.shape(arr) != (n, T):
                raise ValueError(f"`{name}` must have shape ({n}, {T}), got {np.shape(arr)}")
        w = self.weights(logs.action, propensity, T) if propensity is not None else None
        quality = self._combine(logs.quality_target, predicted_quality, w)
        cost = self._combine(logs.cost, predicted_cost, w)
        return CounterfactualScores(quality, cost, self.clip, self.clip_scope)


class DirectMethod(ScoreEstimator):
    """DM: the outcome model's prediction r_t(x)."""

    name = "dm"

    def _combine(self, observed, predicted, w):
        if predicted is None:
            raise ValueError("DM needs outcome-model predictions")
        return np.asarray(predicted, dtype=np.float64).copy()


class InverseProbabilityWeighting(ScoreEstimator):
    """IPW: y * 1[t_i = t] / p(t_i | x_i)."""

    name = "ipw"

    def _combine(self, observed, predicted, w):
        if w is None:
            raise ValueError("IPW needs propensities")
        return w * observed[:, None]


class DoublyRobust(ScoreEstimator):
    """DR: (y - r_t(x)) * 1[t_i = t] / p(t_i | x_i) + r_t(x); ``correction`` < 1 shrinks toward DM."""

    name = "dr"

    def __init__(self, *, correction: float = 1.0, **kwargs) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= correction <= 1.0:
            raise ValueError(f"`correction` must be in [0, 1], got {correction}")
        self.correction = correction

    def _combine(self, observed, predicted, w):
        if predicted is None or w is None:
            raise ValueError("DR needs both outcome-model predictions and propensities")
        return dr_term(np.asarray(predicted, dtype=np.float64), observed[:, None], w, self.correction)


@dataclass(frozen=True)
class HeldOut:
    """What fitted nuisance models say about rows (held out from them, or their own): the counterfactual
    scores, the propensity of each logged choice (n,) and the outcome models' quality and cost (n, T)."""

    scores: CounterfactualScores
    propensity: np.ndarray
    quality_hat: np.ndarray
    cost_hat: np.ndarray


ESTIMATORS = {"dm": DirectMethod, "ipw": InverseProbabilityWeighting, "dr": DoublyRobust}


class Nuisance:
    """The nuisance stage (EconML's DRLearner split): a propensity model, an outcome model and a score
    estimator, composed from objects.

    Args:
        propensity: :class:`~regret_gateway.causal.propensity.LoggedPropensity` (the exact logged values)
            or :class:`~regret_gateway.causal.propensity.PropensityModel` (XGBoost, the paper; default).
        outcome: the outcome model r_t(x) (default: :class:`OutcomeModel` with the paper's training preset).
        estimator: how scores are combined (default: DR with the paper's [5, 95] clipping).
        nuisance_folds: k >= 2 fits the nuisance models on k-1 folds and scores the held-out fold (1: the
            training rows are scored in-sample).
        random_state: seed (each fold's models get their own, derived from it).
    """

    def __init__(
        self,
        *,
        propensity: LoggedPropensity | PropensityModel | None = None,
        outcome: OutcomeModel | None = None,
        estimator: ScoreEstimator | None = None,
        nuisance_folds: int = 1,
        random_state: int = 0,
    ) -> None:
        if nuisance_folds < 1:
            raise ValueError(f"`nuisance_folds` must be >= 1, got {nuisance_folds}")
        self.propensity = propensity if propensity is not None else PropensityModel()
        self.outcome = outcome if outcome is not None else OutcomeModel()
        self.estimator = estimator if estimator is not None else DoublyRobust()
        self.nuisance_folds = nuisance_folds
        self.random_state = random_state

    def _fit_models(self, logs: LoggedFeedback, seed: int):
        outcome = self.outcome.with_seed(seed).fit(logs)
        return outcome, self.propensity.with_seed(seed).fit_logs(logs)

    def _score(self, logs: LoggedFeedback, outcome: OutcomeModel, prop) -> HeldOut:
        """What these models say about ``logs``."""
        p = prop.observed(logs)
        q_hat, c_hat = outcome.predict(logs.X)
        return HeldOut(self.estimator.estimate(logs, p, q_hat, c_hat), p, q_hat, c_hat)

    def fit(self, logs: LoggedFeedback) -> "Nuisance":
        """Fit the outcome and propensity models on all of ``logs``."""
        logs.require_all_models(minimum=1)
        self.outcome_, self.propensity_ = self._fit_models(logs, self.random_state)
        return self

    def scores(self, logs: LoggedFeedback) -> CounterfactualScores:
        """Scores for ``logs`` from the models fitted by :meth:`fit` (use on held-out rows)."""
        return self.held_out(logs).scores

    def held_out(self, logs: LoggedFeedback) -> HeldOut:
        """For held-out ``logs``, from one pass of the models fitted by :meth:`fit`: their scores, the
        propensity of each logged choice and the outcome models' predictions."""
        if not hasattr(self, "outcome_"):
            raise RuntimeError("Nuisance is not fitted; call fit() first")
        return self._score(logs, self.outcome_, self.propensity_)

    def fit_scores(self, logs: LoggedFeedback) -> CounterfactualScores:
        """Fit on ``logs`` and score the same rows; with ``nuisance_folds=k`` each fold is scored out-of-fold (the
        folds never split a prompt: :func:`~regret_gateway.causal.stats.cross_fit_splits`).

        Also leaves the models fitted on all rows in ``outcome_`` / ``propensity_``.
        """
        self.fit(logs)
        if self.nuisance_folds == 1:
            own = self._score(logs, self.outcome_, self.propensity_)
            self.observed_propensity_ = own.propensity
            return own.scores
        quality = np.empty((logs.n_samples, logs.n_models))
        cost = np.empty_like(quality)
        p_all = np.empty(logs.n_samples)
        splits = cross_fit_splits(logs.n_samples, self.nuisance_folds, self.random_state, prompt_groups(logs.X))
        for k, (held, rest) in enumerate(splits):
            outcome, prop = self._fit_models(logs.subset(rest), self.random_state + 1 + k)
            fold = self._score(logs.subset(held), outcome, prop)
            quality[held], cost[held], p_all[held] = fold.scores.quality, fold.scores.cost, fold.propensity
        self.observed_propensity_ = p_all
        return CounterfactualScores(quality, cost, self.estimator.clip, self.estimator.clip_scope)
