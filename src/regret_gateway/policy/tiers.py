"""Per-tier policies, the interval networks between adjacent tiers, and the routing rule (RM-Interval).

Tiers Lambda = {l_1 < ... < l_m}. One RM-Softmax policy f_l per tier. For each interval [l_j, l_j+1]:

    f(x, l) = Linear_out( [f_lj(x), f_lj+1(x)] + g(s) ),   g(s) = GELU(Linear(s)),
    s = (l - l_j) / (l_j+1 - l_j) in [0, 1],

fine-tuned (tier networks frozen) on the softmax regret at both ends, with interval_tau (paper 1000):
loss = R_tau(f(x, l_j), Y^{l_j}) + R_tau(f(x, l_j+1), Y^{l_j+1}). Since the utility is affine in lambda,
the optimal decision is piecewise constant in lambda and the net interpolates between its ends.

Routing rule: lambda in Lambda -> f_lambda; strictly between two tiers -> that interval's net; below the
first / above the last tier -> the nearest tier.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from regret_gateway.policy import objectives
from regret_gateway.policy.methods import RMSoftmax, Router, TrainingData, _lambdas
from regret_gateway.policy.networks import StackedMLP
from regret_gateway.policy.training import TrainConfig, train_members


class IntervalNets(nn.Module):
    """K interval networks stacked (leading member axis K), each over 2T endpoint logits."""

    def __init__(self, n_intervals: int, n_models: int) -> None:
        super().__init__()
        K, T = n_intervals, n_models
        self.g_weight = nn.Parameter(torch.randn(K, 1, 2 * T) * 0.1)
        self.g_bias = nn.Parameter(torch.zeros(K, 1, 2 * T))
        # Start as the average of the two endpoints' logits; training learns where to switch.
        eye = torch.eye(T)
        self.out_weight = nn.Parameter(torch.cat([eye, eye]).unsqueeze(0).repeat(K, 1, 1) * 0.5)
        self.out_bias = nn.Parameter(torch.zeros(K, 1, T))

    def forward(self, ends: torch.Tensor, s: torch.Tensor | float, members: slice = slice(None)) -> torch.Tensor:
        """ends: (k, n, 2T) endpoint logits of the selected intervals; s: position in the interval
        (scalar or broadcastable to (k, n, 1)) -> (k, n, T)."""
        g = torch.nn.functional.gelu(s * self.g_weight[members] + self.g_bias[members])
        return torch.baddbmm(self.out_bias[members], ends + g, self.out_weight[members])


class RMInterval(Router):
    """RM-Interval: per-tier RM-Softmax policies plus interval networks; any lambda >= 0 can be routed.

    Args:
        tiers: the tier lambdas; default: every other lambda passed to ``fit`` (the paper trains on the
            even lambdas and evaluates on the odd ones).
        tau: sharpness of the tier policies' softmax regret (default 1, chosen on validation; paper: 100).
        interval_tau: sharpness used to fine-tune the interval nets (default 10; paper: 1000, the same
            10x ratio).
    """

    name = "rm-interval"

    def __init__(self, *, tiers: Sequence[float] | None = None, tau: float = 1.0, interval_tau: float = 10.0, **kwargs):
        super().__init__(**kwargs)
        self.tiers = tiers
        self.tau = tau
        self.interval_tau = interval_tau

    def fit(self, data: TrainingData, lambdas: Sequence[float]) -> "RMInterval":
        lam = np.sort(_lambdas(lambdas))
        tiers = np.sort(_lambdas(self.tiers)) if self.tiers is not None else lam[::2]
        if len(np.unique(tiers)) != len(tiers):
            raise ValueError(f"tier lambdas must be distinct, got {tiers.tolist()}")
        self.policies_ = RMSoftmax(tau=self.tau, train=self.train, hidden=self.hidden, random_state=self.random_state)
        self.policies_.fit(data, tiers)
        self.tiers_ = tiers
        self.intervals_ = None
        if len(tiers) > 1:
            self._fit_intervals(data)
        self.fitted_ = True
        return self

    def _ends(self, X: torch.Tensor) -> torch.Tensor:
        """(K, n, 2T) logits of the left and right tier of every interval."""
        with torch.no_grad():
            tier_logits = self.policies_.net_(X)  # (m, n, T)
        return torch.cat([tier_logits[:-1], tier_logits[1:]], dim=-1)

    def _fit_intervals(self, data: TrainingData) -> None:
        T, K = data.logs.n_models, len(self.tiers_) - 1
        X, Xv = torch.tensor(data.logs.X), torch.tensor(data.val_logs.X)
        Y = torch.as_tensor(np.stack([data.scores.utility(l) for l in self.tiers_]), dtype=torch.float32)
        Yv = torch.as_tensor(np.stack([data.val_scores.utility(l) for l in self.tiers_]), dtype=torch.float32)
        ends, ends_v = self._ends(X), self._ends(Xv)
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
        self.intervals_ = nets

    @torch.no_grad()
    def route_logits(self, X: np.ndarray, lam: float) -> torch.Tensor:
        """(n, T) logits for one lambda, by the routing rule."""
        self._check_fitted()
        if not np.isfinite(lam) or lam < 0:
            raise ValueError(f"lambda must be finite and >= 0, got {lam}")
        tiers = self.tiers_
        exact = np.flatnonzero(np.isclose(tiers, lam))
        if exact.size or lam <= tiers[0] or lam >= tiers[-1]:
            j = int(exact[0]) if exact.size else (0 if lam <= tiers[0] else len(tiers) - 1)
            return self.policies_.logits(X, [tiers[j]])[0]
        j = int(np.searchsorted(tiers, lam) - 1)  # tiers[j] < lam < tiers[j+1]
        s = (lam - tiers[j]) / (tiers[j + 1] - tiers[j])
        ends = self._ends(torch.tensor(np.asarray(X, dtype=np.float32)))[j : j + 1]
        return self.intervals_(ends, float(s), slice(j, j + 1))[0]

    def predict(self, X: np.ndarray, lambdas: Sequence[float]) -> np.ndarray:
        return np.stack([self.route_logits(X, l).argmax(-1).numpy() for l in _lambdas(lambdas)])

    def state(self) -> dict:
        """Everything needed to route again (tensors and plain values only: loadable with
        ``torch.load(weights_only=True)``)."""
        self._check_fitted()
        net = self.policies_.net_
        return {
            "tiers": [float(t) for t in self.tiers_], "d_in": net.d_in, "n_models": net.d_out, "hidden": list(net.hidden),
            "tau": self.tau, "interval_tau": self.interval_tau,
            "policies": net.state_dict(), "intervals": None if self.intervals_ is None else self.intervals_.state_dict(),
        }

    @classmethod
    def from_state(cls, state: dict) -> "RMInterval":
        """The fitted router that :meth:`state` described (raises on shape mismatches)."""
        tiers = np.asarray(state["tiers"], dtype=np.float64)
        hidden = tuple(int(h) for h in state["hidden"])
        router = cls(tiers=tiers, tau=float(state["tau"]), interval_tau=float(state["interval_tau"]), hidden=hidden)
        policies = RMSoftmax(tau=router.tau, hidden=hidden)
        policies.net_ = StackedMLP(len(tiers), int(state["d_in"]), int(state["n_models"]), hidden)
        policies.net_.load_state_dict(state["policies"])
        policies.lambdas_, policies.fitted_ = tiers, True
        router.policies_, router.tiers_, router.intervals_ = policies, tiers, None
        if state["intervals"] is not None:
            router.intervals_ = IntervalNets(len(tiers) - 1, int(state["n_models"]))
            router.intervals_.load_state_dict(state["intervals"])
        router.fitted_ = True
        return router
