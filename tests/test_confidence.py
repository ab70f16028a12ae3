"""Is X confidently better than Y (regret_gateway/confidence.py): the one test the gate, the regions, the
budget frontier and the trust check share."""

from __future__ import annotations

import numpy as np
import pytest

from regret_gateway.confidence import (
    confidently_above,
    family_alpha,
    holm,
    holm_levels,
    p_value,
    percentile_interval,
    selective_interval,
    selective_lower,
    z_critical,
)


def test_a_family_of_comparisons_shares_alpha_and_its_threshold_rises_with_it():
    assert family_alpha(0.05, 4) == pytest.approx(0.0125) and family_alpha(0.05, 0) == 0.05
    assert z_critical(0.05) == pytest.approx(1.645, abs=1e-3)
    assert z_critical(0.05, two_sided=True) == pytest.approx(1.960, abs=1e-3)
    assert z_critical(0.05, 10) == pytest.approx(2.576, abs=1e-3)  # one of ten: each at 0.005
    assert p_value(z_critical(0.01)) == pytest.approx(0.01)


def test_a_difference_is_confident_only_where_its_interval_clears_what_is_required():
    samples = np.random.default_rng(0).normal(0.03, 0.01, 5000)  # a gain of 3 points, 1 point of noise
    lo, hi = percentile_interval(samples, 0.05)
    assert lo == pytest.approx(0.0104, abs=1e-3) and hi == pytest.approx(0.0496, abs=1e-3)
    assert confidently_above(samples, 0.0) and not confidently_above(samples, 0.02)
    assert not confidently_above(samples, 0.0, family_alpha(0.05, 10_000))  # one of very many: not confident
    assert np.isnan(percentile_interval(np.array([np.nan]))[0])


def test_holm_steps_down_smallest_first_and_stops_at_the_first_failure():
    p = np.array([0.004, 0.03, 0.012, 0.2])
    assert holm(p, 0.05).tolist() == [True, False, True, False]  # 0.004 < .05/4, 0.012 < .05/3, 0.03 > .05/2
    assert holm(p, 0.05, ahead=np.array([True, True, False, True])).tolist() == [True, False, False, False]
    assert holm(np.array([0.03, 0.03]), 0.05).tolist() == [False, False]  # .03 > .05/2: nothing after it either


def test_holm_tests_the_smallest_p_value_at_alpha_over_k_and_each_next_at_a_wider_share():
    assert holm_levels(np.array([0.2, 0.004, 0.03]), 0.06) == pytest.approx([0.06, 0.02, 0.03])


def test_a_bound_given_that_it_passed_holds_at_its_level_among_the_draws_that_passed():
    """Draws of a mean with true value 1 and standard error 1, published where the z test at 1.645 passes
    (about a third of them, the high ones): the plain bound (estimate - 1.645) holds the truth in about
    85% of the published, the bound given that it passed in 95%; the two-sided interval likewise."""
    draws = np.random.default_rng(0).normal(1.0, 1.0, 20_000)
    published = draws[draws > z_critical(0.05)]
    plain = np.mean(published - z_critical(0.05) <= 1.0)
    given = np.mean([selective_lower(t, 1.0, z_critical(0.05)) <= 1.0 for t in published])
    assert plain < 0.9 and given == pytest.approx(0.95, abs=0.01)
    intervals = np.array([selective_interval(t, 1.0, z_critical(0.05)) for t in published[:2000]])
    assert np.mean((intervals[:, 0] <= 1.0) & (1.0 <= intervals[:, 1])) == pytest.approx(0.95, abs=0.015)


def test_far_past_its_threshold_the_bound_is_the_plain_one_and_just_past_it_far_below():
    assert selective_lower(10.0, 1.0, 1.645) == pytest.approx(10.0 - 1.645, abs=1e-3)
    assert selective_lower(1.7, 1.0, 1.645) < -20  # a pass by a hair says almost nothing about the mean
    assert selective_lower(0.5, 0.0, 1.645) == 0.5  # no noise: the estimate
