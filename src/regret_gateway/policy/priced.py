"""The priced router: each model's quality as one number, its cost as a line in the prompt's size.

A request's cost is mostly its tokens at the model's prices, and a prompt's size is known before it is
routed (:class:`~regret_gateway.context.SizeFeature`, appended to the embedding). The outcome networks
must learn cost from the embedding of the prompt's first tokens, which says little of its length; here
each model's cost is fitted as ``fixed + per_token * tokens`` on its own logged answers (least squares,
:mod:`regret_gateway.prices`; which prompts a model was logged on does not bias a regression on the
prompt's size alone) and used where the line explains its logged costs (R^2 >= ``MIN_R2``: a model whose
cost follows its answers' length rather than the prompt's keeps its mean DR cost), and its quality is the
mean of its doubly robust scores. It is the best constant with each request priced: where no line holds,
it is the best constant. At a high lambda a long prompt goes to a cheaper model than a short one.
"""

from __future__ import annotations

import numpy as np

from regret_gateway.context import SizeFeature
from regret_gateway.prices import CostLine, fit_line
from regret_gateway.servable import PricedPolicy

MIN_R2 = 0.5  # share of a model's logged cost variance its line must explain to price its requests


def priced_lines(tokens: np.ndarray, action: np.ndarray, logged_cost: np.ndarray, n_models: int) -> list[CostLine | None]:
    """Each model's cost line in the prompt's ``tokens`` from its logged answers, where it explains at least
    MIN_R2 of their cost's variance (None elsewhere)."""
    lines: list[CostLine | None] = []
    for t in range(n_models):
        rows = action == t
        line, y = fit_line(tokens[rows], logged_cost[rows]), logged_cost[rows]
        if line is not None:
            r2 = 1.0 - float(((y - line.cost(tokens[rows])) ** 2).sum()) / max(float(((y - y.mean()) ** 2).sum()), 1e-300)
            line = line if r2 >= MIN_R2 else None
        lines.append(line)
    return lines


def fit_priced(model_names, quality: np.ndarray, cost: np.ndarray, X: np.ndarray, action: np.ndarray,
               logged_cost: np.ndarray, size: SizeFeature) -> PricedPolicy:  # fmt: skip
    """The priced policy of rows with DR scores ``quality`` and ``cost`` (n, T), features ``X`` (n, d, the
    size feature last), logged ``action`` and ``logged_cost`` (n,): the same rows the best constant is
    chosen on, so the two are compared on equal terms. A model without a line is priced at its mean DR cost."""
    fixed, per_token = np.asarray(cost, dtype=np.float64).mean(0), np.zeros(len(model_names))
    for t, line in enumerate(priced_lines(size.tokens(X), action, logged_cost, len(model_names))):
        if line is not None:
            fixed[t], per_token[t] = line.fixed, line.per_token
    return PricedPolicy(model_names, np.asarray(quality, dtype=np.float64).mean(0), fixed, per_token, size.weight, X.shape[1])
