"""What a notification says, in one line a person reads in Slack or Teams (no I/O).

"Refund 120.00 EUR on O-5101 awaits a manager — approve: <link>". Values that came from people (names,
ids) are escaped the way Slack requires (``&``, ``<``, ``>``), so they cannot forge a link.
"""

from __future__ import annotations

from typing import Any

from erpilot_contracts.tools.v1 import TOOLS


def money(amount_minor: int | None, currency: str | None) -> str:
    if amount_minor is None or currency is None:
        return ""
    sign = "-" if amount_minor < 0 else ""
    major, minor = divmod(abs(amount_minor), 100)
    return f"{sign}{major}.{minor:02d} {currency}"


def escape(text: Any) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def subject(tool: str, arguments: dict[str, Any], preview: dict[str, Any]) -> str:
    """What the operation is: "Refund 120.00 EUR on O-5101", "Order 57.60 EUR for Nordwind …"."""
    amount = money(preview.get("amount_minor"), preview.get("currency"))
    spec = TOOLS.get(tool)
    if spec is not None and spec.traits.headline:  # the tool's own headline (a catalog trait)
        values = {key: value if isinstance(value, int) else escape(value) for key, value in arguments.items()}
        values |= {"amount": amount, "target": escape(preview.get("target", ""))}
        try:
            return " ".join(spec.traits.headline.format_map(values).split())
        except (KeyError, ValueError, TypeError):
            pass  # arguments that do not fit the headline (never from the ledger): the generic line
    return " ".join(p for p in (escape(preview.get("operation", tool)), amount, escape(preview.get("object", ""))) if p)


def roles_phrase(roles: list[str]) -> str:
    """``["manager"]`` → "a manager"; ``["approver", "manager"]`` → "an approver or a manager"."""
    return " or ".join(("an " if role[0] in "aeiou" else "a ") + role for role in roles) or "a decision"


def requested(what: str, roles: list[str], url: str) -> str:
    return f"{what} awaits {roles_phrase(roles)} — approve: <{url}>"


def expiring(what: str, roles: list[str], expires_at: str, url: str) -> str:
    return f"{what} still awaits {roles_phrase(roles)} and expires at {expires_at} — approve: <{url}>"


def escalated(what: str, escalated_to: str, roles: list[str], url: str) -> str:
    return (f"{what} is still undecided: escalated to {roles_phrase([escalated_to])}, now awaits "
            f"{roles_phrase(roles)} — approve: <{url}>")


def resolved(what: str, status: str, decided_by: str | None, on_behalf_of: str | None = None) -> str:
    if status == "expired":
        return f"{what} expired without a decision"
    if status == "superseded":
        return f"{what} was replaced by an edited version"
    by = f" by {escape(decided_by)}" if decided_by and not decided_by.startswith("system:") else ""
    by += f" for {escape(on_behalf_of)}" if by and on_behalf_of else ""
    return f"{what} was {status}{by}"


def finished(what: str, status: str, error_code: str | None) -> str:
    if status == "committed":
        return f"{what} was carried out"
    return f"{what} was not carried out ({escape(error_code or status)})"
