"""Exact conversion between decimal amounts typed by people and integer minor units (no floats)."""

from __future__ import annotations

import re

# ISO-4217 currencies whose minor unit is not 1/100; every other code uses two decimals.
_EXPONENTS = {
    "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
    "RWF": 0, "UGX": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
    "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
}
_AMOUNT = re.compile(r"([0-9]+)(?:\.([0-9]+))?")
_CURRENCY = re.compile(r"[A-Z]{3}")


class InvalidAmount(ValueError):
    """The text is not an exact positive amount in the currency's minor unit."""


def minor_exponent(currency: str) -> int:
    """How many decimals the currency's minor unit has."""
    return _EXPONENTS.get(currency.upper(), 2)


def parse_amount_minor(text: str, currency: str) -> int:
    """``"12.5"`` EUR -> 1250; refuses signs, exponents, separators and digits beyond the minor unit."""
    code = currency.upper()
    if not _CURRENCY.fullmatch(code):
        raise InvalidAmount(f"{currency!r} is not an ISO-4217 currency code")
    match = _AMOUNT.fullmatch(text.strip())
    if match is None:
        raise InvalidAmount(f"{text!r} is not a plain decimal amount like 12.50")
    whole, fraction = match.group(1), match.group(2) or ""
    exponent = minor_exponent(code)
    if len(fraction) > exponent:
        raise InvalidAmount(f"{text} has more than {exponent} decimal(s) for {code}")
    minor = int(whole) * 10**exponent + int(fraction.ljust(exponent, "0") or "0")
    if minor <= 0:
        raise InvalidAmount("the amount must be greater than zero")
    return minor


def format_minor(amount_minor: int, currency: str) -> str:
    """1250, "EUR" -> ``"12.50 EUR"``."""
    exponent = minor_exponent(currency)
    sign = "-" if amount_minor < 0 else ""
    whole, fraction = divmod(abs(amount_minor), 10**exponent)
    digits = f"{whole}.{fraction:0{exponent}d}" if exponent else str(whole)
    return f"{sign}{digits} {currency.upper()}"
