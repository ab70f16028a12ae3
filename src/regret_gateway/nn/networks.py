"""Networks: M independent MLPs evaluated together (one batched matmul per layer), and the interval
networks of RM-Interval (see :mod:`regret_gateway.servable` for the routing rule that uses them).

The paper trains one network per lambda (and one outcome MLP per model). Stacking M independent
networks into one module gives exactly the same models -- the parameters are disjoint and Adam is
element-wise, so member m's updates depend only on member m's loss -- at a fraction of the
Python/BLAS overhead on a 2-core CPU.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class StackedMLP(nn.Module):
    """M independent MLPs ``d_in -> hidden... -> d_out`` with GELU activations.

    ``forward(x)`` takes x of shape (n, d_in) (shared by all members) or (M, n, d_in) (one input per
    member) and returns (M, n, d_out).
    """

    def __init__(self, n_members: int, d_in: int, d_out: int, hidden: tuple[int, ...] = (200, 200)) -> None:
        super().__init__()
        if n_members < 1:
            raise ValueError(f"`n_members` must be >= 1, got {n_members}")
        self.n_members = n_members
        self.d_in = d_in
        self.d_out = d_out
        self.hidden = tuple(hidden)
        sizes = (d_in, *self.hidden, d_out)
        self.active: torch.Tensor | None = None  # member indices forward computes (None: all); see restrict()
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1.0 / math.sqrt(fan_in)  # torch.nn.Linear's default initialisation
            self.weights.append(nn.Parameter(torch.empty(n_members, fan_in, fan_out).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(n_members, 1, fan_out).uniform_(-bound, bound)))

    def restrict(self, members: torch.Tensor | None) -> None:
        """Compute only ``members`` (indices) in :meth:`forward`; None computes all again.

        The output keeps all M members; the others are zeros that no gradient flows through. Training
        uses it to stop paying for members that have already stopped early.
        """
        self.active = None if members is None or len(members) == self.n_members else members

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        members = self.active
        if x.dim() == 2:
            x = x.unsqueeze(0).expand(self.n_members if members is None else len(members), -1, -1)
        elif members is not None:
            x = x[members]
        h = x
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if members is not None:
                w, b = w[members], b[members]
            h = torch.baddbmm(b, h, w)
            if i < last:
                h = torch.nn.functional.gelu(h)
        h = h.float()  # under a bfloat16 autocast (training: nn.training) the losses read float32
        if members is None:
            return h
        return h.new_zeros(self.n_members, *h.shape[1:]).index_copy(0, members, h)

    @classmethod
    def from_arrays(cls, weights: list, biases: list) -> "StackedMLP":
        """The network of these weights (M, in, out) and biases (M, 1, out) arrays, e.g. a published
        policy's (:class:`regret_gateway.servable.MLPArrays`), to run it in torch."""
        M, d_in, _ = weights[0].shape
        net = cls(M, d_in, weights[-1].shape[2], tuple(w.shape[2] for w in weights[:-1]))
        with torch.no_grad():
            for dst, src in zip([*net.weights, *net.biases], [*weights, *biases]):
                dst.copy_(torch.as_tensor(src))
        return net

    def member(self, m: int) -> "StackedMLP":
        """A one-member copy of member ``m`` (e.g. to save one lambda's policy)."""
        single = StackedMLP(1, self.d_in, self.d_out, self.hidden)
        with torch.no_grad():
            for dst, src in zip(single.parameters(), self.parameters()):
                dst.copy_(src[m : m + 1])
        return single


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
        return torch.baddbmm(self.out_bias[members], ends + g, self.out_weight[members]).float()


def interval_ends(tier_net: StackedMLP, X: torch.Tensor) -> torch.Tensor:
    """(K, n, 2T) logits of the left and right tier of each of the K = m - 1 intervals (no gradient)."""
    with torch.no_grad():
        tier_logits = tier_net(X)  # (m, n, T)
    return torch.cat([tier_logits[:-1], tier_logits[1:]], dim=-1)
