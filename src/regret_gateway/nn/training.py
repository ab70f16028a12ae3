"""The training loop shared by every network in the project (policies and outcome models).

Adam, mini-batch or full-batch, early stopping on a validation score per member: each member of a
:class:`~regret_gateway.nn.networks.StackedMLP` keeps its own best parameters and its own patience counter, exactly as if the
members were trained one by one. A member that has waited ``patience`` epochs is stopped for good (a
later lucky validation score does not revive it) and, for a :class:`~regret_gateway.nn.networks.StackedMLP`, is no longer computed:
the remaining epochs cost only what the members still training cost.

Two presets:

* ``paper``: the paper's values -- Adam lr 1e-4, batch 128, patience 100, at most 10,000 epochs.
* ``fast``: full-batch Adam lr 1e-3, patience 50, at most 1,500 epochs.

The optimiser is :class:`Adam`, torch.optim.Adam's update written out: torch.optim's first use imports
torch._dynamo, which took longer than importing torch itself (7-9 s on the 2-core machine) in every process
that trains (a retrain, the demo, the offline bench) and is needed for nothing here.

``TrainConfig.precision`` sets the training steps' matrix products: float32 (the default), bfloat16 (torch's
autocast: the products in bfloat16 with float32 sums, the parameters, the optimiser, the losses and every
validation score in float32), or ``auto``: bfloat16 where the CPU multiplies bfloat16 natively (AVX512-BF16
or AMX; about 2.7 times the float32 step of a 200-wide network on this project's 2-core machine), else
float32. What a trained network predicts runs in float32 either way.

The outcome models of the nuisance stage (``OUTCOME_PRESET``) train with ``paper``: with ``fast`` they
lose 2-3 points of validation utility for R&C and RM-Classification, for ~15 s per trial saved. The
policy networks train with ``fast``: within one standard deviation of ``paper`` for every method on
validation and test, 2.5-2.8x less time for the whole benchmark. The measurements are in the README
(``bench offline --train-preset`` / ``--outcome-preset``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable

import torch

PRECISIONS = ("float32", "bfloat16", "auto")


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 1e-3
    batch_size: int | None = None  # None: full batch
    max_epochs: int = 1500
    patience: int = 50
    weight_decay: float = 0.0
    precision: str = "float32"  # the training steps' matrix products: one of PRECISIONS (module doc)

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError(f"`lr` must be > 0, got {self.lr}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"`batch_size` must be >= 1 or None, got {self.batch_size}")
        if self.max_epochs < 1 or self.patience < 1:
            raise ValueError("`max_epochs` and `patience` must be >= 1")
        if self.precision not in PRECISIONS:
            raise ValueError(f"`precision` must be one of {PRECISIONS}, got {self.precision!r}")


def native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (AVX512-BF16 or AMX): where it does not, torch
    emulates them, slower than float32."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def step_dtype(precision: str) -> torch.dtype:
    """The dtype of the training steps' matrix products under ``precision`` on this machine."""
    if precision == "bfloat16" or (precision == "auto" and native_bfloat16()):
        return torch.bfloat16
    return torch.float32


PRESETS: dict[str, TrainConfig] = {
    "fast": TrainConfig(),
    "paper": TrainConfig(lr=1e-4, batch_size=128, max_epochs=10_000, patience=100),
}


OUTCOME_PRESET = "paper"  # default preset of the outcome models (see the module docstring)


def preset(name: str) -> TrainConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown training preset '{name}'; choose one of {sorted(PRESETS)}") from None


class Adam:
    """Adam with L2 weight decay added to the gradient: torch.optim.Adam's single-tensor update (its default on
    CPU), operation for operation, so a fit is the same to the last bit (tests/nn/test_training.py); a
    parameter without a gradient is left alone and its step count does not advance, as there."""

    def __init__(self, params: Sequence[torch.Tensor], lr: float, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:  # fmt: skip
        self.params, self.lr, self.weight_decay, self.betas, self.eps = list(params), lr, weight_decay, betas, eps
        self.steps = [0] * len(self.params)
        self.moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        for i, (p, (exp_avg, exp_avg_sq)) in enumerate(zip(self.params, self.moments)):
            if p.grad is None:
                continue
            grad = p.grad if self.weight_decay == 0 else p.grad.add(p, alpha=self.weight_decay)
            self.steps[i] += 1
            step = float(self.steps[i])
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step_size = self.lr / (1 - beta1**step)
            denom = (exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(self.eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)


@dataclass(frozen=True)
class TrainResult:
    epochs: int  # epochs run
    best_epoch: torch.Tensor  # (M,) epoch of each member's best validation score
    best_score: torch.Tensor  # (M,) best validation score per member


def _products_in(dtype: torch.dtype) -> contextlib.AbstractContextManager:
    """The training step's matrix products in ``dtype``: autocast for bfloat16 (the networks return float32,
    so the losses are computed in it), nothing for float32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=dtype)


@torch.no_grad()
def _copy_members(dst: list[torch.Tensor], src: list[torch.Tensor], members: torch.Tensor) -> None:
    for d, s in zip(dst, src):
        d[members] = s[members]


def train_members(
    net: torch.nn.Module,
    n_rows: int,
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    val_score: Callable[[], torch.Tensor],
    config: TrainConfig,
    *,
    seed: int = 0,
) -> TrainResult:
    """Train all members of ``net`` with per-member early stopping; restores each member's best state.

    Args:
        net: M stacked networks: every parameter has a leading member axis of size M.
        n_rows: number of training rows; batches are index tensors into them.
        batch_loss: ``idx -> (M,)`` training loss of each member on rows ``idx``.
        val_score: ``() -> (M,)`` validation score of each member (lower is better), e.g. regret.
        config: optimiser and stopping settings.
        seed: seed of the batch order.
    """
    if n_rows < 1:
        raise ValueError("cannot train on 0 rows")
    params = list(net.parameters())
    optimizer = Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        best_score = val_score().detach().clone()
    M = best_score.shape[0]
    if any(p.shape[0] != M for p in params):
        raise ValueError(f"every parameter needs a leading member axis of size {M}")
    best_state = [p.detach().clone() for p in params]
    best_epoch = torch.zeros(M, dtype=torch.long)
    waiting = torch.zeros(M, dtype=torch.long)
    active = torch.ones(M, dtype=torch.bool)  # members still training
    restrict = getattr(net, "restrict", None)  # StackedMLP: skip the stopped members' compute
    batch = n_rows if config.batch_size is None else min(config.batch_size, n_rows)
    dtype = step_dtype(config.precision)
    epoch = 0
    try:
        for epoch in range(1, config.max_epochs + 1):
            net.train()
            order = torch.randperm(n_rows, generator=generator) if batch < n_rows else torch.arange(n_rows)
            for start in range(0, n_rows, batch):
                idx = order[start : start + batch]
                optimizer.zero_grad()
                with _products_in(dtype):
                    loss = batch_loss(idx)
                loss[active].sum().backward()
                optimizer.step()
            net.eval()
            with torch.no_grad():
                score = val_score()
            improved = active & (score < best_score - 1e-9)
            if improved.any():
                _copy_members(best_state, [p.detach() for p in params], improved)
                best_score = torch.where(improved, score, best_score)
                best_epoch[improved] = epoch
            waiting = torch.where(improved, torch.zeros_like(waiting), waiting + 1)
            stopped = active & (waiting >= config.patience)
            if stopped.any():
                active &= ~stopped
                if not active.any():
                    break
                if restrict is not None:
                    restrict(torch.nonzero(active).squeeze(1))
    finally:
        if restrict is not None:
            restrict(None)
    with torch.no_grad():
        for p, saved in zip(params, best_state):
            p.copy_(saved)
    net.eval()
    return TrainResult(epochs=epoch, best_epoch=best_epoch, best_score=best_score)
