"""Who logged each row of a training set: its logging policy (:class:`Logger`: a tier under a router version,
the cold start, or the historical policy of imported rows) and what that policy favoured at the row's prompt
(:func:`favoured_of`) or, where the gateway logged it, its whole distribution there (:func:`distributions_of`) --
what the off-policy estimators weight each logger by (causal/ope.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from regret_gateway.data import FAVOURED_UNIFORM, FAVOURED_UNKNOWN


@dataclass(frozen=True)
class Logger:
    """The randomised policy that logged a row: its ``tier`` under the router ``version`` that chose it (None:
    the cold start, before any router); every imported row is one historical policy (:meth:`imported`:
    neither tier nor version)."""

    tier: str | None
    version: str | None

    @classmethod
    def imported(cls) -> "Logger":
        return cls(None, None)


def loggers_of(tiers: Sequence[str], versions: Sequence[str | None], modes: Sequence[str]) -> tuple[Logger, ...]:
    """(n,) the logging policy of each row, decided once as the store is read: its tier under the router
    version that chose it (cold start: no version); every imported row one historical policy. Rows of one
    logger were drawn from one randomised policy."""
    imported = Logger.imported()
    return tuple(imported if mode == "imported" else Logger(tier, version) for tier, version, mode in zip(tiers, versions, modes))


def favoured_of(modes: Sequence[str], greedy: Sequence[str | None], models: Sequence[str],
                propensities: Sequence[float | None], index: dict[str, int]) -> np.ndarray:  # fmt: skip
    """(n,) what each row's logger favoured at its prompt: the router's greedy choice (its index in ``index``),
    the model a logger that did not randomise (propensity 1) chose, :data:`FAVOURED_UNIFORM` for the cold
    start's uniform draw among the eligible models, else :data:`FAVOURED_UNKNOWN` (imported; logged before
    the greedy choice was kept)."""
    out = np.full(len(modes), FAVOURED_UNKNOWN, dtype=np.int64)
    for i, (mode, g, m, p) in enumerate(zip(modes, greedy, models, propensities)):
        if mode == "cold_start":
            out[i] = FAVOURED_UNIFORM
        elif g is not None and g in index:
            out[i] = index[g]
        elif p is not None and p >= 1.0 and m in index:
            out[i] = index[m]
    return out


def distributions_of(texts: Sequence[str | None], index: dict[str, int]) -> np.ndarray:
    """(n, T) each row's logging distribution over the models of ``index`` as the gateway logged it (the
    decisions' ``propensities``, JSON text: the non-zero entries; a model it lacks had probability 0), NaN in
    every column of a row that has none (the uniform cold start, one model, imported or older logs)."""
    out = np.full((len(texts), len(index)), np.nan)
    for i, text in enumerate(texts):
        spread = json.loads(text) if text else None
        if isinstance(spread, dict):
            out[i] = 0.0
            for model, p in spread.items():
                if model in index:
                    out[i, index[model]] = float(p)
    return out
