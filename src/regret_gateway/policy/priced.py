"""The priced router: each model's quality as one number, its cost as a line in the prompt's size.

A request's cost is mostly its tokens at the model's prices, and a prompt's size is known before it is
routed (:class:`~regret_gateway.context.SizeFeature`, appended to the embedding). The outcome networks
must learn cost from the embedding of the prompt's first tokens, which says little of its length; here
each model's cost is fitted as ``fixed + per_token * tokens`` on its own logged answers (least squares,
:mod:`regret_gateway.prices`; which prompts a model was logged on does not bias a regression on the
prompt's size alone), and its quality is the mean of its doubly robust scores on every row. At a high
lambda a long prompt then goes to a cheaper model than a short one, a gain that rests on the logged
costs, which vary far less than the logged quality.
"""

from __future__ import annotations

import numpy as np

from regret_gateway.context import SizeFeature
from regret_gateway.policy.base import TrainingData
from regret_gateway.prices import fit_line
from regret_gateway.servable import PricedPolicy


def fit_priced(data: TrainingData, size: SizeFeature) -> PricedPolicy:
    """The priced policy of a fit's rows (training and validation: their DR quality scores, their logged
    costs and sizes). A model with too few logged rows for a line is priced at its mean DR cost."""
    logs, val_logs = data.observed("the priced router")
    quality = np.concatenate([data.scores.quality, data.val_scores.quality]).mean(0)
    mean_cost = np.concatenate([data.scores.cost, data.val_scores.cost]).mean(0)
    X = np.concatenate([logs.X, val_logs.X])
    action = np.concatenate([logs.action, val_logs.action])
    cost = np.concatenate([logs.cost, val_logs.cost])
    tokens = size.tokens(X)
    fixed, per_token = mean_cost.copy(), np.zeros(len(quality))
    for t in range(len(quality)):
        rows = action == t
        if (line := fit_line(tokens[rows], cost[rows])) is not None:
            fixed[t], per_token[t] = line.fixed, line.per_token
    return PricedPolicy(logs.model_names, quality, fixed, per_token, size.weight, X.shape[1])
