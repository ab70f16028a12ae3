"""RM-Interval training: per-tier policies and the interval networks between adjacent tiers.

Tiers Lambda = {l_1 < ... < l_m}. One RM-Softmax policy f_l per tier. For each interval [l_j, l_j+1]:

    f(x, l) = Linear_out( [f_lj(x), f_lj+1(x)] + g(s) ),   g(s) = GELU(Linear(s)),
    s = (l - l_j) / (l_j+1 - l_j) in [0, 1],

fine-tuned (tier networks frozen) on the softmax regret at both ends, with interval_tau (paper 1000):
loss = R_tau(f(x, l_j), Y^{l_j}) + R_tau(f(x, l_j+1), Y^{l_j+1}). Since the utility is affine in lambda,
the optimal decision is piecewise constant in lambda and the net interpolates between its ends.

The fitted router is served as a :class:`~regret_gateway.servable.RMIntervalPolicy`, which holds the routing
rule (lambda in Lambda -> f_lambda; strictly between two tiers -> that interval's net; below the first /
above the last tier -> the nearest tier).
"""

from __future__ import annotations

import numpy as np
import torch

from regret_gateway.nn import objectives
from regret_gateway.nn.networks import IntervalNets, interval_ends
from regret_gateway.nn.training import train_members
from regret_gateway.policy.methods import RMSoftmax
from regret_gateway.policy.router import Lambdas, Router, TrainingData, check_lambdas
from regret_gateway.servable import CandidateKind, IntervalArrays, MLPArrays, RMIntervalPolicy


class RMInterval(Router):
    """RM-Interval: per-tier RM-Softmax policies plus interval networks; any lambda >= 0 can be routed.

    Args:
        tiers: the tier lambdas; default: every other lambda passed to ``fit`` (the paper trains on the
            even lambdas and evaluates on the odd ones).
        tau: sharpness of the tier policies' softmax regret (default 1, chosen on validation; paper: 100).
        interval_tau: sharpness used to fine-tune the interval nets (default 10; paper: 1000, the same
            10x ratio).
    """

    name = CandidateKind.RM_INTERVAL.value

    def __init__(self, *, tiers: Lambdas | None = None, tau: float = 1.0, interval_tau: float = 10.0, **kwargs):
        super().__init__(**kwargs)
        self.tiers = tiers
        self.tau = tau
        self.interval_tau = interval_tau

    def fit(self, data: TrainingData, lambdas: Lambdas) -> "RMInterval":
        lam = np.sort(check_lambdas(lambdas))
        tiers = np.sort(check_lambdas(self.tiers)) if self.tiers is not None else lam[::2]
        if len(np.unique(tiers)) != len(tiers):
            raise ValueError(f"tier lambdas must be distinct, got {tiers.tolist()}")
        policies = RMSoftmax(tau=self.tau, train=self.train, hidden=self.hidden, random_state=self.random_state)
        policies.fit(data, tiers)
        self.tiers_, self.policies_ = tiers, policies
        self.intervals_ = self._fit_intervals(data, policies) if len(tiers) > 1 else None
        intervals = None if self.intervals_ is None else IntervalArrays.of(self.intervals_)
        self.policy_ = RMIntervalPolicy(
            data.model_names, tiers, MLPArrays.of(policies.net_), intervals, tau=self.tau, interval_tau=self.interval_tau
        )
        self.fitted_ = True
        return self

    def _fit_intervals(self, data: TrainingData, policies: RMSoftmax) -> IntervalNets:
        T, K = data.n_models, len(self.tiers_) - 1
        X, Xv = torch.tensor(data.X), torch.tensor(data.X_val)
        Y = torch.as_tensor(np.stack([data.scores.utility(l) for l in self.tiers_]), dtype=torch.float32)
        Yv = torch.as_tensor(np.stack([data.val_scores.utility(l) for l in self.tiers_]), dtype=torch.float32)

        ends, ends_v = interval_ends(policies.net_, X), interval_ends(policies.net_, Xv)
        torch.manual_seed(self.random_state)
        nets = IntervalNets(K, T)

        def loss(idx):
            e = ends[:, idx]
            left = objectives.softmax_regret(nets(e, 0.0), Y[:-1, idx], self.interval_tau)
            right = objectives.softmax_regret(nets(e, 1.0), Y[1:, idx], self.interval_tau)
            return left + right

        def val():
            return objectives.regret(Yv[:-1], nets(ends_v, 0.0)) + objectives.regret(Yv[1:], nets(ends_v, 1.0))

        train_members(nets, len(X), loss, val, self.train, seed=self.random_state)
        return nets

    def route_logits(self, X: np.ndarray, lam: float) -> np.ndarray:
        """(n, T) logits for one lambda, by the routing rule of :class:`RMIntervalPolicy`."""
        self._check_fitted()
        return self.policy_.logits(X, lam)

    def predict(self, X: np.ndarray, lambdas: Lambdas) -> np.ndarray:
        return np.stack([self.route_logits(X, l).argmax(-1) for l in check_lambdas(lambdas)])

    def to_policy(self) -> RMIntervalPolicy:
        self._check_fitted()
        return self.policy_
