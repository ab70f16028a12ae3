"""Outcome models r_t(x): one MLP (2 hidden layers of 200, GELU) per model t, fitted on the rows t answered.

Each network has two heads: quality (a logit, binary cross-entropy, so soft scores in [0, 1] work) and
cost (mean squared error on cost divided by the model's mean logged cost). Quality and cost are fitted
separately from the utility because the doubly robust score is linear in y:
Y^lambda(t) = A(t) - lambda * C(t) for every lambda from one fit.

``shared=True`` fits the same shape of network with shared strength: one trunk (the hidden layers) on every
logged row, whichever model answered it, and each model's output layer the shared one plus a deviation
shrunk toward zero (``shrink``: an L2 penalty per logged row, so it weakens as the logs grow) with its
own bias (started at the model's mean). What one model's rows teach about a prompt (how hard it is, what
it asks for) serves every model, and a model with few rows stays near the shared prediction plus its mean.
The fit is published as the same per-model networks (the trunk copied into each), so everything that
reads an outcome model reads it unchanged.

The networks fit every row's score as it was recorded, a judge's included (the DR targets carry the
judge's correction). ``judge_error=True`` (opt-in, for studies) fits rows scored by a judge whose error
retrain measured (``LoggedFeedback.target_errors``) through that error instead (forward correction): a
judge score of correction g is, in expectation, ``false_pass[g] + (1 - false_pass[g] - false_fail[g]) *
truth``, so the quality head is fitted as the truth that, seen through the judge, gives the score, and
predicts the truth rather than the judge's view of it with every gap shrunk. It is not the default: no
better on LLMRouter's dev slices nor in the paired replays (docs/experiments/judge.md, "Fitting the
networks through the judge's error").
"""

from __future__ import annotations

import numpy as np
import torch

from regret_gateway.causal.reseed import Reseedable
from regret_gateway.data import LoggedFeedback
from regret_gateway.nn.networks import StackedMLP
from regret_gateway.nn.training import OUTCOME_PRESET, TrainConfig, preset, train_members
from regret_gateway.servable import MLPArrays, OutcomePolicy, outcome_heads


def _padded(index_lists: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, n_max) row indices (0 where padded) and (T, n_max) float mask."""
    n_max = max(len(ix) for ix in index_lists)
    rows = torch.zeros(len(index_lists), n_max, dtype=torch.long)
    mask = torch.zeros(len(index_lists), n_max)
    for t, ix in enumerate(index_lists):
        rows[t, : len(ix)] = torch.as_tensor(ix, dtype=torch.long)
        mask[t, : len(ix)] = 1.0
    return rows, mask


def _quality_loss(logs: LoggedFeedback, judge_error: bool):
    """``loss(logit, rows)``: each row's quality loss, elementwise over index tensors of any shape. Binary
    cross-entropy of the row's score on the prediction; with ``judge_error``, on the predicted truth seen
    through the judge's measured error where the row's score is a corrected judge score (``false_pass + (1 -
    false_pass - false_fail) * truth``)."""
    q = torch.tensor(logs.quality, dtype=torch.float32)
    errors = logs.target_errors
    if not judge_error or errors is None or not np.any(errors.group >= 0):
        return lambda logit, rows: torch.nn.functional.binary_cross_entropy_with_logits(logit, q[rows], reduction="none")
    g = np.maximum(errors.group, 0)
    judged = torch.as_tensor(errors.group >= 0)
    floor = torch.as_tensor(np.where(errors.group >= 0, errors.false_pass[g], 0.0), dtype=torch.float32)
    span = torch.as_tensor(np.where(errors.group >= 0, 1.0 - errors.false_pass[g] - errors.false_fail[g], 1.0),
                           dtype=torch.float32)  # fmt: skip

    def loss(logit: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        plain = torch.nn.functional.binary_cross_entropy_with_logits(logit, q[rows], reduction="none")
        seen = (floor[rows] + span[rows] * torch.sigmoid(logit)).clamp(1e-6, 1 - 1e-6)  # what the judge reports
        through = -(q[rows] * torch.log(seen) + (1 - q[rows]) * torch.log1p(-seen))
        return torch.where(judged[rows], through, plain)

    return loss


class OutcomeModel(Reseedable):
    """Per-model outcome regressions r_t(x) = (E[a | x, t], E[c | x, t]).

    Args:
        hidden: hidden layer sizes (paper: (200, 200)).
        train: optimiser and early-stopping settings (default: the paper's, see
            :mod:`regret_gateway.nn.training`).
        val_fraction: share of each model's rows held out for early stopping.
        random_state: seed of the split, the initialisation and the batch order.
        shared: one trunk for every model, each model's output layer shrunk toward a shared one (above).
        shrink: with ``shared``, the L2 penalty on each model's deviation from the shared output layer, per
            logged row.
        judge_error: fit a corrected judge's scores through its measured error (above; opt-in).
    """

    def __init__(
        self,
        *,
        hidden: tuple[int, ...] = (200, 200),
        train: TrainConfig = preset(OUTCOME_PRESET),
        val_fraction: float = 0.2,
        random_state: int = 0,
        shared: bool = False,
        shrink: float = 1.0,
        judge_error: bool = False,
    ) -> None:
        if shrink < 0:
            raise ValueError(f"`shrink` must be >= 0, got {shrink}")
        self.hidden = hidden
        self.train = train
        self.val_fraction = val_fraction
        self.random_state = random_state
        self.shared = shared
        self.shrink = shrink
        self.judge_error = judge_error

    def fit(self, logs: LoggedFeedback) -> "OutcomeModel":
        logs.require_all_models(minimum=1)
        T = logs.n_models
        rng = np.random.default_rng(self.random_state)
        train_ix, val_ix = [], []
        for t in range(T):
            ix = rng.permutation(np.flatnonzero(logs.action == t))
            n_val = int(round(self.val_fraction * len(ix))) if len(ix) >= 5 else 0
            train_ix.append(ix[n_val:])
            val_ix.append(ix[:n_val] if n_val else ix)  # tiny models: validate on the training rows
        scale = np.array([logs.cost[logs.action == t].mean() for t in range(T)])
        self.cost_scale_ = np.where(scale > 0, scale, 1.0)

        X = torch.tensor(logs.X)
        c = torch.as_tensor(logs.cost / self.cost_scale_[logs.action], dtype=torch.float32)
        bce = _quality_loss(logs, self.judge_error)
        if self.shared:
            return self._fit_shared(logs, X, c, np.concatenate(train_ix), np.concatenate(val_ix), bce)
        tr_rows, tr_mask = _padded(train_ix)
        va_rows, va_mask = _padded(val_ix)

        torch.manual_seed(self.random_state)
        net = StackedMLP(T, X.shape[1], 2, self.hidden)

        def loss_on(rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            out = net(X[rows])  # (T, b, 2)
            mse = (out[..., 1] - c[rows]) ** 2
            return ((bce(out[..., 0], rows) + mse) * mask).sum(1) / mask.sum(1).clamp(min=1.0)

        result = train_members(
            net,
            tr_rows.shape[1],
            lambda idx: loss_on(tr_rows[:, idx], tr_mask[:, idx]),
            lambda: loss_on(va_rows, va_mask),
            self.train,
            seed=self.random_state,
        )
        self.net_ = net
        self.n_models_ = T
        self.epochs_ = result.epochs
        self.val_loss_ = result.best_score.numpy()
        return self

    def _fit_shared(
        self, logs: LoggedFeedback, X: torch.Tensor, c: torch.Tensor, train_ix: np.ndarray, val_ix: np.ndarray, bce
    ) -> "OutcomeModel":
        T = logs.n_models
        torch.manual_seed(self.random_state)
        mean_q = np.array([logs.quality[logs.action == t].mean() for t in range(T)]).clip(0.01, 0.99)
        net = _SharedOutcomeNet(T, X.shape[1], self.hidden, np.log(mean_q / (1 - mean_q)))
        action = torch.as_tensor(np.array(logs.action), dtype=torch.long)
        tr, va = torch.as_tensor(train_ix, dtype=torch.long), torch.as_tensor(val_ix, dtype=torch.long)
        penalty = self.shrink / max(len(train_ix), 1)

        def loss_on(rows: torch.Tensor) -> torch.Tensor:
            out = net(X[rows], action[rows])  # (n, 2)
            return (bce(out[:, 0], rows) + (out[:, 1] - c[rows]) ** 2).mean().reshape(1)

        result = train_members(
            net,
            len(train_ix),
            lambda idx: loss_on(tr[idx]) + penalty * (net.deviation**2).sum(),
            lambda: loss_on(va),
            self.train,
            seed=self.random_state,
        )
        self.net_ = net.as_stacked()
        self.n_models_ = T
        self.epochs_ = result.epochs
        self.val_loss_ = np.repeat(result.best_score.numpy(), T)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise RuntimeError("OutcomeModel is not fitted; call fit() first")

    @torch.no_grad()
    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return (quality_hat, cost_hat), each (n, T): r_t(x) for every model t."""
        self._check_fitted()
        return outcome_heads(self.net_(torch.tensor(np.asarray(X, dtype=np.float32))).numpy(), self.cost_scale_)

    def to_policy(self, model_names) -> OutcomePolicy:
        """R&C as a servable policy: argmax_t A(t) - lambda * C(t) of these outcome networks."""
        self._check_fitted()
        return OutcomePolicy(model_names, MLPArrays.of(self.net_), self.cost_scale_)


class _SharedOutcomeNet(torch.nn.Module):
    """The shared form's network, every parameter with a leading axis of 1 (one member, for
    :func:`train_members`): a trunk (the hidden layers, GELU after each), and for model t the output layer
    ``shared + deviation[t]`` with bias ``bias[t]``."""

    def __init__(self, n_models: int, d_in: int, hidden: tuple[int, ...], quality_logit: np.ndarray) -> None:
        super().__init__()
        *inner, width = hidden
        self.trunk = StackedMLP(1, d_in, width, tuple(inner))
        bound = 1.0 / float(np.sqrt(width))
        self.shared = torch.nn.Parameter(torch.empty(1, width, 2).uniform_(-bound, bound))
        self.deviation = torch.nn.Parameter(torch.zeros(1, n_models, width, 2))
        start = np.stack([quality_logit, np.ones(n_models)], axis=1)  # each model's mean quality; cost / its mean
        self.bias = torch.nn.Parameter(torch.as_tensor(start, dtype=torch.float32).unsqueeze(0))

    def forward(self, x: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """(n, 2): the logged model's quality logit and scaled cost for each row."""
        h = torch.nn.functional.gelu(self.trunk(x)[0])  # (n, width)
        w = self.shared[0] + self.deviation[0, action]  # (n, width, 2)
        return torch.einsum("nw,nwk->nk", h, w).float() + self.bias[0, action]

    @torch.no_grad()
    def as_stacked(self) -> StackedMLP:
        """The same predictions as per-model networks: the trunk copied into each of the T members."""
        T = self.deviation.shape[1]
        weights = [w.expand(T, -1, -1).clone() for w in self.trunk.weights]
        biases = [b.expand(T, -1, -1).clone() for b in self.trunk.biases]
        weights.append((self.shared + self.deviation[0]).clone())
        biases.append(self.bias[0].unsqueeze(1).clone())
        return StackedMLP.from_arrays(weights, biases)
