"""Dollars: an amount as people read it (:func:`usd`), and what a model's answer costs as a line in the prompt's size: ``fixed`` (the answer itself: its output
tokens at their price, on average) plus ``per_token`` (the input price) per prompt token, fitted by least
squares on the answers a model gave. The one formula the gateway's cost caps (on the store's answers,
``store.steering.cost_lines``) and retrain's priced router (on the logged rows, ``policy.priced``) use."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def usd(amount: float) -> str:
    """An amount of dollars as people read it: ``$1,234.57`` from a dollar up, else to three significant digits
    (``$0.000123``, ``$0.001``, ``$0.50``; not ``$0.00``: one request's cost is a small amount)."""
    a = abs(float(amount))
    digits = 2 if a >= 1 or a == 0 or not math.isfinite(a) else max(2, 2 - math.floor(math.log10(a)))
    text = f"{a:,.{digits}f}"
    if digits > 2:  # $0.001, not $0.00100
        whole, cents = text.split(".")
        text = f"{whole}.{cents.rstrip('0').ljust(2, '0')}"
    return f"{'-' if amount < 0 else ''}${text}"


MIN_LINE_ROWS = 20  # answers with a prompt size before a model's cost line is fitted


@dataclass(frozen=True)
class CostLine:
    """A model's cost per answer: ``fixed + per_token * prompt_tokens``, both >= 0, from ``rows`` answers."""

    fixed: float
    per_token: float
    rows: int

    def cost(self, prompt_tokens):
        return self.fixed + self.per_token * prompt_tokens


def line_from_sums(n: int, sx: float, sy: float, sxx: float, sxy: float) -> CostLine | None:
    """The least-squares line of cost y on prompt tokens x from their sums (what a database can add up);
    with a slope or an intercept below 0 the one-parameter fit that keeps both >= 0 (the mean, or a line
    through 0). None under MIN_LINE_ROWS answers or where every prompt had the same size."""
    spread = n * sxx - sx * sx
    if n < MIN_LINE_ROWS or spread <= 1e-9 * max(n * sxx, 1e-300):
        return None
    slope = (n * sxy - sx * sy) / spread
    fixed = (sy - slope * sx) / n
    if slope < 0:
        return CostLine(max(sy / n, 0.0), 0.0, n)
    if fixed < 0:
        return CostLine(0.0, max(sxy / sxx, 0.0), n)
    return CostLine(fixed, slope, n)


def fit_line(tokens: np.ndarray, cost: np.ndarray) -> CostLine | None:
    """:func:`line_from_sums` of these answers (``tokens`` and ``cost``, (n,) each)."""
    x, y = np.asarray(tokens, dtype=np.float64), np.asarray(cost, dtype=np.float64)
    return line_from_sums(len(x), float(x.sum()), float(y.sum()), float(x @ x), float(x @ y))
