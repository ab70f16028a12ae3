"""Propensity of the logged action p(t_i | x_i): the exact logged value, or an XGBoost estimate.

Both implement the nuisance stage's propensity interface: ``fit_logs(logs) -> self``,
``observed(logs) -> (n,)`` p(t_i | x_i) of each row's logged action, ``with_seed(seed)`` (an unfitted copy).

* :class:`LoggedPropensity` -- the propensity the gateway logged when it sampled the model (exact; beyond
  the paper, which estimates it).
* :class:`PropensityModel` -- XGBoost multi-class, grid chosen on validation log-loss (the paper's grid;
  needed for imported logs that carry no propensity). Where some rows carry their logged propensity and
  others were imported without one (:attr:`~regret_gateway.data.LoggedFeedback.imported`), it estimates
  the imported rows' logging policy from those rows and keeps the logged value on the others.


For each ``max_depth`` one booster with ``max(n_estimators)`` rounds is trained; the smaller round
counts of the grid are its prefixes (boosting is sequential, so the first k trees are exactly the
model trained with ``n_estimators=k``). Boosting stops early once the validation log-loss has not
improved for ``patience`` rounds; grid points past that stop are not evaluated (they would only be
worse-fitting continuations). Features are binned into ``max_bin`` histogram bins (64: 4x faster than
XGBoost's 256 on 384-d embeddings). The best (depth, rounds) pair is refitted on all rows.
"""

from __future__ import annotations

import numpy as np

from regret_gateway.causal.reseed import Reseedable
from regret_gateway.data import LoggedFeedback

MIN_IMPORTED_ROWS = 50  # fewer imported rows: the model is fitted on every row (the logging policies' mixture)
MAX_DEPTHS = (1, 2, 3, 5)
N_ESTIMATORS = (10, 20, 50, 100)


def _log_loss(proba: np.ndarray, y: np.ndarray, eps: float = 1e-15) -> float:
    p = np.clip(proba[np.arange(len(y)), y], eps, 1.0)
    return float(-np.mean(np.log(p)))


class LoggedPropensity:
    """The exact propensities the logs carry (the gateway logged p(t | x) of every choice it sampled)."""

    def with_seed(self, random_state: int) -> "LoggedPropensity":
        return self

    def fit_logs(self, logs: LoggedFeedback) -> "LoggedPropensity":
        self.observed(logs)
        return self

    def observed(self, logs: LoggedFeedback) -> np.ndarray:
        if logs.imported.any():
            raise ValueError("some rows carry no logged propensity (imported); estimate them with PropensityModel (XGBoost)")
        assert logs.propensity is not None
        return logs.propensity


class PropensityModel(Reseedable):
    """Multi-class XGBoost estimate of the logging policy p(t | x).

    Args:
        max_depths, n_estimators: the grid (defaults: the paper's {1,2,3,5} x {10,20,50,100}).
        val_fraction: share of rows held out to choose the grid point.
        learning_rate: XGBoost eta.
        floor: predicted probabilities are clipped to at least this value (and renormalised) so that
            inverse-propensity weights stay finite.
        random_state: seed of the validation split and of XGBoost.
        n_jobs: XGBoost threads.
    """

    def __init__(
        self,
        *,
        max_depths: tuple[int, ...] = MAX_DEPTHS,
        n_estimators: tuple[int, ...] = N_ESTIMATORS,
        val_fraction: float = 0.2,
        learning_rate: float = 0.3,
        floor: float = 1e-3,
        max_bin: int = 64,
        patience: int = 20,
        random_state: int = 0,
        n_jobs: int = 2,
    ) -> None:
        self.max_depths = tuple(max_depths)
        self.n_estimators = tuple(sorted(n_estimators))
        self.val_fraction = val_fraction
        self.learning_rate = learning_rate
        self.floor = floor
        self.max_bin = max_bin
        self.patience = patience
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit_logs(self, logs: LoggedFeedback) -> "PropensityModel":
        """Fit the logging policy of the imported rows on those rows (on every row where fewer than
        :data:`MIN_IMPORTED_ROWS` were imported, or none: then it is the mixture of the logging policies)."""
        rows = logs.imported
        if rows.sum() < MIN_IMPORTED_ROWS or rows.all():
            rows = np.ones(logs.n_samples, dtype=bool)
        return self.fit(logs.X[rows], logs.action[rows], logs.n_models)

    def observed(self, logs: LoggedFeedback) -> np.ndarray:
        """(n,) p(t_i | x_i): the logged value where the row carries one, the estimate where it was imported."""
        p = self.predict_observed(logs.X, logs.action)
        imported = logs.imported
        if logs.propensity is None or not imported.any():  # none logged, or the paper's setting
            return p  # (every row logged, its propensity estimated all the same: `bench offline --propensity xgboost`)
        return np.where(imported, p, logs.propensity)

    def _params(self, depth: int, n_models: int) -> dict:
        return {
            "objective": "multi:softprob",
            "num_class": n_models,
            "max_depth": depth,
            "eta": self.learning_rate,
            "tree_method": "hist",
            "max_bin": self.max_bin,
            "nthread": self.n_jobs,
            "seed": self.random_state,
            "verbosity": 0,
        }

    def fit(self, X: np.ndarray, action: np.ndarray, n_models: int) -> "PropensityModel":
        import xgboost as xgb

        X = np.asarray(X, dtype=np.float32)
        action = np.asarray(action, dtype=np.int64)
        if X.ndim != 2 or action.shape != (X.shape[0],):
            raise ValueError(f"`X` (n, d) and `action` (n,) must agree, got {X.shape} and {action.shape}")
        if action.size == 0:
            raise ValueError("cannot fit a propensity model on 0 rows")
        if action.min() < 0 or action.max() >= n_models:
            raise ValueError(f"`action` must be in [0, {n_models - 1}]")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"`val_fraction` must be in (0, 1), got {self.val_fraction}")
        rng = np.random.default_rng(self.random_state)
        perm = rng.permutation(len(action))
        n_val = max(1, int(round(self.val_fraction * len(action))))
        val, tr = perm[:n_val], perm[n_val:]
        if len(tr) == 0:
            raise ValueError("too few rows to hold out a validation split for the propensity grid")
        dtrain = xgb.DMatrix(X[tr], label=action[tr])
        dval = xgb.DMatrix(X[val], label=action[val])
        scores: dict[tuple[int, int], float] = {}
        for depth in self.max_depths:
            booster = xgb.train(
                self._params(depth, n_models) | {"eval_metric": "mlogloss"},
                dtrain,
                num_boost_round=self.n_estimators[-1],
                evals=[(dval, "val")],
                early_stopping_rounds=self.patience,
                verbose_eval=False,
            )
            for k in self.n_estimators:
                if k > booster.num_boosted_rounds():
                    break
                proba = booster.predict(dval, iteration_range=(0, k)).reshape(len(val), n_models)
                scores[(depth, k)] = _log_loss(proba, action[val])
        best = min(scores, key=lambda point: scores[point])
        self.grid_scores_ = {f"max_depth={d},n_estimators={k}": v for (d, k), v in scores.items()}
        self.best_params_ = {"max_depth": best[0], "n_estimators": best[1]}
        self.val_log_loss_ = scores[best]
        self.n_models_ = n_models
        self.booster_ = xgb.train(self._params(best[0], n_models), xgb.DMatrix(X, label=action), num_boost_round=best[1])
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """(n, T) estimated p(t | x), each row summing to 1, every entry >= ``floor`` (before renorm)."""
        if not hasattr(self, "booster_"):
            raise RuntimeError("PropensityModel is not fitted; call fit() first")
        import xgboost as xgb

        X = np.asarray(X, dtype=np.float32)
        proba = self.booster_.predict(xgb.DMatrix(X)).reshape(len(X), self.n_models_)
        proba = np.maximum(proba, self.floor)
        return proba / proba.sum(axis=1, keepdims=True)

    def predict_observed(self, X: np.ndarray, action: np.ndarray) -> np.ndarray:
        """(n,) p(action_i | x_i)."""
        proba = self.predict_proba(X)
        return proba[np.arange(len(action)), np.asarray(action, dtype=np.int64)]
