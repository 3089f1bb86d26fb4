"""Parsing of the rules planner's command language (documented in ``rules_planner``) into tool calls."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from erpilot_agent.domain.money import InvalidAmount, parse_amount_minor


@dataclass(frozen=True)
class Command:
    """One tool call to make; an open-draft command first needs the draft from get_order_task."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    on_open_draft: bool = False
    draft_id: str | None = None  # chosen with "draft <id>: ..." when the session has several
    beside: tuple[Command, ...] = ()  # more calls made in the same step, in parallel (never open-draft ones)

    def calls(self) -> list[Command]:
        """This call and the ones made beside it, in the order they are issued."""
        return [self, *self.beside]


class CommandError(ValueError):
    """The command was recognised but its values are invalid; the message is the reply."""


Builder = Callable[[re.Match[str]], Command]
_FLAGS = re.IGNORECASE | re.DOTALL
_LINE = re.compile(r"(\S+)\s+x\s*([0-9]+)", _FLAGS)
HELP_WORDS = frozenset({"help", "?", "commands"})
MAX_PAGE = 200  # get_draft's largest limit


def _search(match: re.Match[str]) -> Command:
    tool = "search_customers" if match["what"].lower() == "customer" else "search_products"
    return Command(tool, {"query": (match["query"] or "").strip()})


def _search_both(match: re.Match[str]) -> Command:
    query = {"query": (match["query"] or "").strip()}
    return Command("search_products", query, beside=(Command("search_customers", dict(query)),))


def _show_draft(match: re.Match[str]) -> Command:
    arguments: dict[str, Any] = {"draft_id": match["id"]}
    if match["revision"]:
        arguments["revision"] = int(match["revision"])
    if match["first"]:
        first, last = int(match["first"]), int(match["last"] or match["first"])
        if not 1 <= first <= last or last - first >= MAX_PAGE:
            raise CommandError(f"write the lines as <first>-<last>, 1-based, at most {MAX_PAGE} at a time")
        arguments.update(offset=first - 1, limit=last - first + 1)
    return Command("get_draft", arguments)


def _create_draft(match: re.Match[str]) -> Command:
    lines_text, note = _split_note(match["rest"])
    lines = []
    for part in lines_text.split(","):
        line = _LINE.fullmatch(part.strip())
        if line is None:
            raise CommandError(f"could not read the line {part.strip()!r}; write it as <sku> x<qty>")
        lines.append({"sku": line[1], "qty": int(line[2])})
    arguments: dict[str, Any] = {"customer_id": match["customer"], "lines": lines}
    if note:
        arguments["note"] = note
    return Command("create_order_draft", arguments)


def _split_note(text: str) -> tuple[str, str]:
    """The lines and the optional trailing ``note: <text>`` (kept verbatim)."""
    parts = re.split(r"\s*\bnote:\s*", text, maxsplit=1, flags=_FLAGS)
    return parts[0], (parts[1].strip() if len(parts) == 2 else "")


def _cancel(match: re.Match[str]) -> Command:
    arguments = {"order_id": match["id"]}
    if match["reason"]:
        arguments["reason"] = match["reason"].strip()
    return Command("cancel_order", arguments)


def _money(match: re.Match[str], doing: str) -> dict[str, Any]:
    """The order, the amount in minor units and the currency of a refund or credit note command."""
    currency = match["currency"].upper()
    try:
        amount_minor = parse_amount_minor(match["amount"], currency)
    except InvalidAmount as exc:
        raise CommandError(f"cannot {doing}: {exc}") from None
    return {"order_id": match["id"], "amount_minor": amount_minor, "currency": currency}


def _refund(match: re.Match[str]) -> Command:
    return Command("refund_payment", {**_money(match, "refund"), "channel": "original"})


def _credit_note(match: re.Match[str]) -> Command:
    return Command("issue_credit_note", {**_money(match, "credit"), "reason": match["reason"].strip()})


def _open_draft(tool: str, arguments: Callable[[re.Match[str]], dict[str, Any]]) -> Builder:
    return lambda match: Command(tool, arguments(match), on_open_draft=True)


# Open-draft commands: draft_id and base_revision (or revision) come from get_order_task.
_DRAFT_COMMANDS: list[tuple[str, Builder]] = [
    (r"set\s+line\s+(?P<n>[0-9]+)\s+to\s+(?P<sku>\S+)\s+x\s*(?P<qty>[0-9]+)", _open_draft(
        "update_draft_line",
        lambda m: {"item_number": int(m["n"]), "expected_sku": m["sku"], "qty": int(m["qty"])})),
    # Without the SKU: the planner takes it from line n of the draft get_order_task shows.
    (r"(?:set|change)\s+line\s+(?P<n>[0-9]+)\s+to\s+(?:quantity|qty|x)\s*(?P<qty>[0-9]+)", _open_draft(
        "update_draft_line", lambda m: {"item_number": int(m["n"]), "qty": int(m["qty"])})),
    (r"add\s+(?P<sku>\S+)\s+x\s*(?P<qty>[0-9]+)", _open_draft(
        "add_draft_line", lambda m: {"sku": m["sku"], "qty": int(m["qty"])})),
    (r"remove\s+line\s+(?P<n>[0-9]+)\s+(?P<sku>\S+)", _open_draft(
        "remove_draft_line", lambda m: {"item_number": int(m["n"]), "expected_sku": m["sku"]})),
    (r"note:\s*(?P<note>.+)", _open_draft("set_draft_note", lambda m: {"note": m["note"].strip()})),
    (r"submit", _open_draft("submit_order", lambda m: {})),
]

_COMMANDS: list[tuple[str, Builder]] = [
    (r"find\s+(?:products?\s+and\s+customers?|customers?\s+and\s+products?)(?:\s+(?P<query>.*))?",
     _search_both),
    (r"find\s+(?P<what>customer|product)s?(?:\s+(?P<query>.*))?", _search),
    # The whole catalog, as a person asks for it: "show me the catalog once more".
    (r"(?:show|list)\s+(?:me\s+)?(?:the\s+)?(?:whole\s+)?catalog(?:ue)?(?:\s+(?:once\s+more|again))?\s*[.!]?",
     lambda m: Command("search_products", {"query": ""})),
    (r"show\s+product\s+(?P<sku>\S+)", lambda m: Command("get_product", {"sku": m["sku"]})),
    (r"show\s+order\s+(?P<id>\S+)", lambda m: Command("get_order", {"order_id": m["id"]})),
    (r"show\s+task", lambda m: Command("get_order_task")),
    (r"show\s+draft\s+(?P<id>\S+)(?:\s+rev(?:ision)?\s+(?P<revision>[0-9]+))?"
     r"(?:\s+lines?\s+(?P<first>[0-9]+)(?:\s*-\s*(?P<last>[0-9]+))?)?", _show_draft),
    (r"draft\s+for\s+(?P<customer>[^\s:]+)\s*:\s*(?P<rest>.+)", _create_draft),
    (r"cancel\s+order\s+(?P<id>\S+)(?:\s+because\s+(?P<reason>.+))?", _cancel),
    (r"adjust\s+stock\s+(?P<sku>\S+)\s+(?P<delta>[+-][0-9]+)\s+because\s+(?P<reason>.+)",
     lambda m: Command("adjust_stock",
                       {"sku": m["sku"], "delta": int(m["delta"]), "reason": m["reason"].strip()})),
    (r"refund\s+(?P<id>\S+)\s+(?P<amount>\S+)\s+(?P<currency>[A-Za-z]{3})", _refund),
    (r"credit\s+(?P<id>\S+)\s+(?P<amount>\S+)\s+(?P<currency>[A-Za-z]{3})\s+because\s+(?P<reason>.+)",
     _credit_note),
    *_DRAFT_COMMANDS,
]

_CHOSEN_DRAFT = re.compile(r"draft\s+(?!for\s)(?P<id>[^\s:]+)\s*:\s*(?P<inner>.+)", _FLAGS)


def _match(text: str, table: list[tuple[str, Builder]]) -> Command | None:
    for pattern, build in table:
        match = re.fullmatch(pattern, text, _FLAGS)
        if match:
            return build(match)
    return None


def parse_command(text: str) -> Command | None:
    """The command in a user message, or None when it is not one; raises CommandError on bad values."""
    text = text.strip()
    command = _match(text, _COMMANDS)
    if command is not None:
        return command
    chosen = _CHOSEN_DRAFT.fullmatch(text)
    if chosen is None:
        return None
    inner = _match(chosen["inner"].strip(), _DRAFT_COMMANDS)
    if inner is None:
        raise CommandError("after 'draft <id>:' write set line / add / remove line / note: / submit")
    return Command(inner.tool, inner.arguments, on_open_draft=True, draft_id=chosen["id"])
