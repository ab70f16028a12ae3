"""Which models can take a request: its prompt plus the answer it may need must fit a model's window, and it
must take what the request carries (tools, images, a JSON schema). The router and its exploration choose only
among the eligible models, so the logged propensity is exact over them; a request no model can take is
refused with a 400 before any upstream call. A limit no one states (gateway/model_info.py) is not checked.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from regret_gateway.config import Settings
from regret_gateway.limits import ModelInfo, Needs, refusal


class Eligibility:
    """The routed models' info (:func:`~regret_gateway.gateway.model_info.group_info`) and, per request, which
    of them can take it."""

    def __init__(self, settings: Settings, info: Mapping[str, ModelInfo]) -> None:
        self.settings = settings
        self.info = {m: info.get(m, ModelInfo()) for m in settings.models}

    @property
    def reads_size(self) -> bool:
        """Whether some model's window is known: only then is a request's size counted for it."""
        return any(i.max_input_tokens is not None for i in self.info.values())

    def needs(self, data: Mapping, prompt_tokens: int | None) -> Needs:
        return Needs.of(data, prompt_tokens, self.settings.expected_output_tokens)

    def refusals(self, needs: Needs) -> dict[str, str]:
        """model -> why it cannot take the request, for each model that cannot."""
        return {m: why for m, info in self.info.items() if (why := refusal(info, needs)) is not None}

    def allowed(self, needs: Needs) -> np.ndarray | None:
        """(T,) over ``settings.models``: which can take the request; None where all can."""
        refused = self.refusals(needs)
        if not refused:
            return None
        return np.array([m not in refused for m in self.settings.models])


class NoEligibleModel(ValueError):
    """No routed model can take the request: the client is told why (400), no upstream is called."""

    def __init__(self, needs: Needs, refusals: Mapping[str, str]) -> None:
        why = "; ".join(f"{m}: {r}" for m, r in refusals.items())
        super().__init__(f"no model can take this request ({needs.label}): {why}")
