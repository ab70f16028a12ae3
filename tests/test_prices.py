"""Dollars as people read them: a request's cost is a fraction of a cent, and `status` and `report` print it
in full instead of rounding it away."""

import pytest

from regret_gateway.prices import usd


@pytest.mark.parametrize(
    "amount, text",
    [(0.0, "$0.00"), (0.000123456, "$0.000123"), (0.001, "$0.001"), (0.0042, "$0.0042"), (0.5, "$0.50"), (1.234, "$1.23"),
     (12345.678, "$12,345.68"), (-0.00031, "-$0.00031")],
)  # fmt: skip
def test_small_amounts_keep_three_significant_digits_and_large_ones_cents(amount, text):
    assert usd(amount) == text
