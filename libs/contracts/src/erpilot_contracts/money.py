"""What "minor units" mean on the wire: the ISO 4217 exponent of each currency, and the display text.

Money is integer minor units plus an ISO-4217 ``currency`` (SPEC §2). Most currencies have two decimals;
this table lists the ones that differ (ISO 4217 "minor unit" column), so ``1234 JPY`` is 1,234 yen and
``1234 KWD`` is 1.234 dinar. An unknown or missing code falls back to two decimals, the SPEC's default.
"""

from __future__ import annotations

CURRENCY_EXPONENTS: dict[str, int] = {
    # no minor unit
    "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
    "RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
    # three decimals
    "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
    # four decimals
    "CLF": 4, "UYW": 4,
}


def exponent(currency: str | None) -> int:
    """Decimals of ``currency``'s major unit (ISO 4217); 2 when the code is unknown or missing."""
    return CURRENCY_EXPONENTS.get(currency or "", 2)


def format_minor(amount_minor: int, currency: str | None, *, grouping: bool = True) -> str:
    """``123456, "EUR"`` -> ``"1,234.56 EUR"``; ``1234, "JPY"`` -> ``"1,234 JPY"``; no code, no suffix."""
    if type(amount_minor) is not int:
        raise TypeError(f"amount_minor must be an int, not {type(amount_minor).__name__}")
    digits = exponent(currency)
    sign = "-" if amount_minor < 0 else ""
    major, minor = divmod(abs(amount_minor), 10**digits)
    text = f"{major:,}" if grouping else str(major)
    if digits:
        text += f".{minor:0{digits}d}"
    return f"{sign}{text} {currency}" if currency else f"{sign}{text}"
