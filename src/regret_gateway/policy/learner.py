"""The composed learner: a nuisance stage (propensity, outcome model, score estimator, cross-fitting) and a
final stage (the policy), as objects -- EconML's DRLearner split. ``retrain``, the offline bench, the demo
and the tests all learn through it.

    learner = Learner(nuisance=Nuisance(propensity=LoggedPropensity(), outcome=OutcomeModel()),
                      policy=RMInterval(tiers=[0, 200, 1000]))
    learner.fit(train_logs, val_logs, lambdas=[0, 200, 1000])
    learner.policy_.to_policy()      # what the gateway serves
"""

from __future__ import annotations

from regret_gateway.causal.estimators import Nuisance
from regret_gateway.data import LoggedFeedback
from regret_gateway.policy.router import Lambdas, Router, TrainingData


def fit_training_data(nuisance: Nuisance, logs: LoggedFeedback, val_logs: LoggedFeedback) -> TrainingData:
    """Fit ``nuisance`` on ``logs`` and score both splits (the training rows in-sample, or out-of-fold with
    cross-fitting; the validation rows with the models fitted on all training rows)."""
    scores = nuisance.fit_scores(logs)
    return TrainingData.from_logs(logs, scores, val_logs, nuisance.scores(val_logs), nuisance)


class Learner:
    """Nuisance stage + final stage.

    Args:
        nuisance: the unfitted nuisance stage.
        policy: the unfitted router (any :class:`~regret_gateway.policy.router.Router`).
    """

    def __init__(self, *, nuisance: Nuisance, policy: Router) -> None:
        self.nuisance = nuisance
        self.policy = policy

    def fit(self, logs: LoggedFeedback, val_logs: LoggedFeedback, lambdas: Lambdas) -> "Learner":
        """Nuisance on ``logs``, then the policy for ``lambdas`` (early stopping on ``val_logs``)."""
        self.data_ = fit_training_data(self.nuisance, logs, val_logs)
        self.policy_ = self.policy.fit(self.data_, lambdas)
        return self

    @property
    def nuisance_(self) -> Nuisance:
        return self.data_.nuisance  # type: ignore[return-value]
