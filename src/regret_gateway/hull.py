"""The cost-quality frontier's formulas, in one place (the savings page, the offline bench): the upper
hull of (cost, quality) points -- what sending requests to them at random mixes reaches --, the average
quality under it over a cost range (RouterBench's AIQ), and the cost at which it first reaches a quality
(RouteLLM's CPT, generalised beyond two models)."""

from __future__ import annotations

import numpy as np


def upper_hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The non-decreasing upper convex hull of (cost, quality) points, cheapest first: at each cost the best
    quality a random mixture of the points reaches (a dearer point that is no better is left out)."""
    hull: list[tuple[float, float]] = []
    for p in sorted(points):
        if hull and p[1] <= hull[-1][1]:
            continue  # dearer and no better
        while len(hull) >= 2 and (hull[-1][0] - hull[-2][0]) * (p[1] - hull[-2][1]) >= (p[0] - hull[-2][0]) * (
            hull[-1][1] - hull[-2][1]
        ):
            hull.pop()
        hull.append(p)
    return hull


def hull_value(hull: list[tuple[float, float]], cost: np.ndarray) -> np.ndarray:
    """The hull's quality at each ``cost``: interpolated between its points, flat past its dearest, NaN
    below its cheapest (no mixture of the points costs less)."""
    x, y = np.array([p[0] for p in hull]), np.array([p[1] for p in hull])
    cost = np.asarray(cost, dtype=np.float64)
    return np.where(cost < x[0], np.nan, np.interp(cost, x, y))


def average_quality(points: list[tuple[float, float]], lo: float, hi: float) -> float:
    """AIQ: the mean quality under the upper hull of ``points`` over costs [lo, hi] (the cheapest and the
    dearest single model; NaN where the hull costs more than ``lo``: the caller includes the cheapest model,
    which any router can send some traffic to)."""
    hull = upper_hull(points)
    grid = np.linspace(lo, hi, 1001)
    return float(np.nanmean(hull_value(hull, grid)))


def cost_to_reach(points: list[tuple[float, float]], quality: float) -> float:
    """The least cost at which the upper hull of ``points`` reaches ``quality`` (inf: it never does)."""
    hull = upper_hull(points)
    for (c0, q0), (c1, q1) in zip([hull[0], *hull], hull):
        if q1 >= quality:
            return c1 if q1 == q0 or q0 >= quality else c0 + (quality - q0) / (q1 - q0) * (c1 - c0)
    return float("inf")
