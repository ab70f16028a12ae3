"""Is X confidently better than Y (regret_gateway/confidence.py): the one test the gate, the regions, the
budget frontier and the trust check share."""

from __future__ import annotations

import numpy as np
import pytest

from regret_gateway.confidence import confidently_above, family_alpha, holm, p_value, percentile_interval, z_critical


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
