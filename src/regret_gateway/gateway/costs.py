"""What each model is predicted to cost a request, and which models a tier's per-request cap on it
(``max_cost_per_request_usd``) leaves.

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

    def under_cap(self, artifact: RouterArtifact | None, columns: np.ndarray | None, X: np.ndarray, cap: float,
                  tier: str, prompt_tokens: float | None = None, among: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
        """(T,) the models of ``among`` (default: all) not predicted to cost more than ``cap`` for the request
        ``X`` (1, d); where every one of them is, the cheapest predicted of them. A model whose cost nothing
        predicts stays allowed."""
        among = np.ones(len(self.settings.models), dtype=bool) if among is None else among
        costs = self.predicted(artifact, columns, X, prompt_tokens, tier)[0]
        allowed = among & ~(costs > cap)
        if not allowed.any():
            known = np.where(among & np.isfinite(costs), costs, np.inf)
            allowed = among & (known == known.min()) if np.isfinite(known.min()) else among
        return allowed
