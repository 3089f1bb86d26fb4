"""Integer-only money: amounts are minor units (cents) and no float ever takes part in a calculation."""

from __future__ import annotations

from collections.abc import Iterable

from erpilot_contracts.money import format_minor


def line_total_minor(qty: int, unit_price_minor: int, discount_pct: int) -> int:
    """``qty * unit_price * (100 - discount) / 100``, rounded half-up to a whole minor unit."""
    _require_int("qty", qty, minimum=0)
    _require_int("unit_price_minor", unit_price_minor, minimum=0)
    _require_int("discount_pct", discount_pct, minimum=0, maximum=100)
    hundredths = qty * unit_price_minor * (100 - discount_pct)
    # Adding 50 before the floor division rounds .5 up; every operand is non-negative, so this is exact.
    return (hundredths + 50) // 100


def total_minor(line_totals: Iterable[int]) -> int:
    """The sum of line totals: the order total is never discounted or rounded a second time."""
    return sum(line_totals)


def format_money(amount_minor: int, currency: str) -> str:
    """``123456, "EUR"`` -> ``"1234.56 EUR"``; the currency's ISO 4217 exponent (``1234, "JPY"`` -> ``"1234 JPY"``)."""
    return format_minor(amount_minor, currency, grouping=False)


def _require_int(name: str, value: object, *, minimum: int, maximum: int | None = None) -> None:
    # bool is an int subclass and a float may be "integral": both would hide a caller's mistake.
    if type(value) is not int:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        raise ValueError(f"{name} out of range: {value}")
