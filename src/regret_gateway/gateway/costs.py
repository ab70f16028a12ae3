"""What each model is predicted to cost a request, and a tier's per-request cap on it
(``max_cost_per_request_usd``).

The prediction, per configured model: with the request's prompt tokens, the model's cost line in the store
where it has one (what its answers cost for their prompts' sizes, so a long prompt is predicted dear); else
the published router's cost estimates (utility at lambda 0 minus utility at lambda 1, from the embedding,
which reads a prompt's first tokens only); else its mean cost in the store; NaN where none knows. The
store's figures are set by the gateway's steerer at each of its steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from regret_gateway.config import Settings

if TYPE_CHECKING:
    from regret_gateway.artifacts import RouterArtifact
    from regret_gateway.prices import CostLine


class CostCaps:
    """The store's cost figures (``model_costs``: mean cost per answer; ``cost_lines``: cost as a line in the
    prompt's tokens), the predictions made from them and the router, and the cap that reads them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model_costs: dict[str, float] = {}
        self.cost_lines: dict[str, CostLine] = {}

    def seen(self, costs: dict[str, float], lines: dict[str, CostLine]) -> None:
        """What the store says each model costs (the steerer's step)."""
        self.model_costs, self.cost_lines = costs, lines

    def predicted(self, artifact: RouterArtifact | None, columns: np.ndarray | None, X: np.ndarray,
                  prompt_tokens: float | None = None, tier: str | None = None) -> np.ndarray:  # fmt: skip
        """(n, T) each configured model's predicted cost (USD) for the requests ``X`` (n, d); ``columns``: where
        each of the artifact's models sits in ``settings.models``."""
        models = self.settings.models
        out = np.tile([self.model_costs.get(m, np.nan) for m in models], (len(X), 1))
        u0 = None if artifact is None else artifact.router.utility_estimates(X, 0.0, tier)
        if artifact is not None and u0 is not None:
            out[:, columns] = u0 - artifact.router.utility_estimates(X, 1.0, tier)  # type: ignore[operator]
        if prompt_tokens is not None:
            for t, m in enumerate(models):
                if (line := self.cost_lines.get(m)) is not None:
                    out[:, t] = line.cost(prompt_tokens)
        return out

    def capped(self, p: np.ndarray, best: int, scores: dict | None, artifact: RouterArtifact | None,
               columns: np.ndarray | None, X: np.ndarray, cap: float, tier: str,
               prompt_tokens: float | None = None) -> tuple[np.ndarray, int, dict | None]:  # fmt: skip
        """``p`` without the models predicted to cost more than ``cap`` (every model's, if all do: the cheapest
        predicted stays); their probability goes to the allowed model the router scores highest (ties, as
        under a constant: the one the utility estimates at the tier's lambda rank first). Exact: the request
        is drawn from what is returned."""
        costs = self.predicted(artifact, columns, X, prompt_tokens, tier)[0]
        allowed = ~(costs > cap)  # a model whose cost nothing predicts stays allowed
        if not allowed.any():
            allowed = costs == np.nanmin(costs)
        if allowed.all():
            return p, best, scores
        if not allowed[best]:
            models = self.settings.models
            score = np.full(len(models), -np.inf)
            for m, v in (scores or {}).items():
                score[models.index(m)] = v
            utility = np.zeros(len(models))
            lam = self.settings.tiers[tier].lam
            estimates = None if artifact is None else artifact.router.utility_estimates(X, lam, tier)
            if estimates is not None:
                utility[columns] = estimates[0]
            best = int(max(np.flatnonzero(allowed), key=lambda t: (score[t], utility[t], p[t])))
        q = np.where(allowed, p, 0.0)
        q[best] += 1.0 - q.sum()
        return q, best, scores
