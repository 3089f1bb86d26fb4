from __future__ import annotations

from fractions import Fraction
from math import floor

import pytest
from hypothesis import given
from hypothesis import strategies as st

from erpilot_erp.domain.pricing import format_money, line_total_minor, total_minor

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("qty", "unit_price", "discount", "expected"),
    [
        (3, 1000, 0, 3000),  # no discount: plain product
        (2, 1000, 10, 1800),  # exact after discount
        (1, 5, 10, 5),  # 4.5 rounds half up to 5
        (1, 15, 10, 14),  # 13.5 -> 14
        (1, 14, 10, 13),  # 12.6 -> 13
        (1, 11, 10, 10),  # 9.9 -> 10
        (1, 16, 10, 14),  # 14.4 -> 14
        (3, 333, 15, 849),  # 849.15 -> 849
        (7, 1, 50, 4),  # 3.5 -> 4
        (5, 999, 100, 0),  # fully discounted
        (0, 999, 10, 0),
    ],
)
def test_line_total_rounds_half_up_in_integers(qty, unit_price, discount, expected):
    assert line_total_minor(qty, unit_price, discount) == expected


@given(
    qty=st.integers(min_value=0, max_value=100_000),
    unit_price=st.integers(min_value=0, max_value=10_000_000),
    discount=st.integers(min_value=0, max_value=100),
)
def test_line_total_equals_exact_rational_rounded_half_up(qty, unit_price, discount):
    exact = Fraction(qty * unit_price * (100 - discount), 100)
    assert line_total_minor(qty, unit_price, discount) == floor(exact + Fraction(1, 2))


@pytest.mark.parametrize("bad", [2.0, 2.5, "2", True, None])
def test_non_integers_are_refused_not_reinterpreted(bad):
    with pytest.raises(TypeError):
        line_total_minor(bad, 100, 0)
    with pytest.raises(TypeError):
        line_total_minor(1, bad, 0)
    with pytest.raises(TypeError):
        line_total_minor(1, 100, bad)


@pytest.mark.parametrize(
    ("qty", "price", "discount"), [(-1, 100, 0), (1, -100, 0), (1, 100, -1), (1, 100, 101)]
)
def test_out_of_range_values_are_refused(qty, price, discount):
    with pytest.raises(ValueError):
        line_total_minor(qty, price, discount)


def test_total_is_the_plain_sum_of_line_totals():
    assert total_minor([5, 14, 13]) == 32
    assert total_minor([]) == 0


@pytest.mark.parametrize(
    ("amount", "expected"), [(0, "0.00 EUR"), (5, "0.05 EUR"), (123456, "1234.56 EUR"), (-1050, "-10.50 EUR")]
)
def test_format_money_uses_two_decimals_and_the_currency_code(amount, expected):
    assert format_money(amount, "EUR") == expected


@pytest.mark.parametrize(("amount", "currency", "expected"),
                         [(1234, "JPY", "1234 JPY"), (1234, "KWD", "1.234 KWD"), (-5, "USD", "-0.05 USD")])
def test_format_money_uses_the_iso_exponent_of_the_currency(amount, currency, expected):
    assert format_money(amount, currency) == expected
