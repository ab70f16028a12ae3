"""The cost-quality frontier's formulas: the hull random mixtures reach, the average quality under it (AIQ)
and the cost at which it reaches a quality (CPT)."""

import pytest

from regret_gateway.hull import average_quality, cost_to_reach, upper_hull

MODELS = [(1.0, 50.0), (2.0, 52.0), (3.0, 70.0), (4.0, 69.0), (5.0, 75.0)]


def test_the_upper_hull_of_the_single_models_is_what_mixing_them_reaches():
    assert upper_hull(MODELS) == [(1.0, 50.0), (3.0, 70.0), (5.0, 75.0)]  # (2, 52) under the chord, (4, 69) no better


def test_aiq_is_the_mean_quality_under_the_hull_from_the_cheapest_to_the_dearest_model():
    zero = average_quality(MODELS, 1.0, 5.0)
    assert zero == pytest.approx((60.0 * 2 + 72.5 * 2) / 4, abs=0.05)  # 50 -> 70 over [1, 3], 70 -> 75 over [3, 5]
    # a router at (2, 74): better than any mixture there, and flat past its dearest point
    assert average_quality([(2.0, 74.0), MODELS[0]], 1.0, 5.0) == pytest.approx((62.0 + 74.0 * 3) / 4, abs=0.05)
    assert average_quality([(2.0, 74.0), MODELS[0]], 1.0, 5.0) > zero


def test_the_cost_to_reach_a_quality_interpolates_on_the_hull_and_is_infinite_past_it():
    assert cost_to_reach(MODELS, 60.0) == pytest.approx(2.0)
    assert cost_to_reach(MODELS, 75.0) == pytest.approx(5.0)
    assert cost_to_reach(MODELS, 40.0) == pytest.approx(1.0)  # the cheapest already does
    assert cost_to_reach(MODELS, 80.0) == float("inf")
