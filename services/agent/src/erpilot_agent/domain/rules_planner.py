"""Erpilot offline planner (ERPILOT_MODEL=rules). Commands, one per message, case-insensitive:

  help                                        this text
  show context                                what this request holds (size, drafts shown)
  find customer <query>                       search customers by id or name
  find product <query>                        search products by SKU or name
  find products and customers [<query>]       both searches at once
  show catalog                                every product ("show me the catalog once more")
  show product <sku>                          one product with price and stock
  show order <order_id>                       one order
  show task                                   this session's open draft(s)
  show draft <draft_id> [revision <n>] [lines <a>-<b>]
                                              a draft, latest or given revision (or some lines)
  draft for <customer_id>: <sku> x<qty>[, <sku> x<qty>...] [note: <text>]
                                              create an order draft
  set line <n> to <sku> x<qty>                change line n's quantity (line n must hold <sku>)
  change line <n> to quantity <qty>           the same, with the SKU line n shows in the open draft
  add <sku> x<qty>                            append a line to the open draft
  remove line <n> <sku>                       remove line n (it must hold <sku>)
  note: <text>                                set the open draft's note
  submit                                      submit the open draft (needs approval)
  cancel order <order_id> [because <reason>]  cancel an order; returns stock, never refunds
  adjust stock <sku> <+n|-n> because <reason> change on-hand stock (needs approval)
  refund <order_id> <amount> <CUR>            refund e.g. 12.50 EUR to the original channel
  credit <order_id> <amount> <CUR> because <reason>
                                              issue a credit note on an order (needs approval)

The open-draft commands (set line, add, remove line, note:, submit) first read this session's open
draft. When there are several, prefix the command with the draft: 'draft D-1002: submit'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from erpilot_agent.domain.history import Entry, Exchange, Turn, last_turn, outcome_of
from erpilot_agent.domain.rules_commands import HELP_WORDS, Command, CommandError, parse_command
from erpilot_agent.domain.rules_context import CONTEXT_WORDS, describe_request
from erpilot_agent.domain.rules_summary import describe_candidates, summarise

HELP = __doc__.strip()
CALL_ID_PREFIX = "rules-"


@dataclass(frozen=True)
class PlannerReply:
    """What a model returns: a text answer, or tool calls ``{"id", "name", "arguments": dict}``."""

    text: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class _Step:
    """The turn being planned and how to name the calls it makes."""

    turn: Turn
    call_id_prefix: str
    last_number: int  # the highest call number the history shows (see ``_last_call_number``)

    def call(self, tool: str, arguments: dict[str, Any]) -> PlannerReply:
        return self.calls([Command(tool, arguments)])

    def calls(self, commands: list[Command]) -> PlannerReply:
        # The ids depend only on the history, so replaying the same history yields the same ids and the
        # agent never records two calls for one decision.
        return PlannerReply(None, [{"id": f"{self.call_id_prefix}{self.last_number + n}", "name": c.tool,
                                    "arguments": c.arguments} for n, c in enumerate(commands, start=1)])


def _last_call_number(history: list[Entry], turn: Turn, prefix: str) -> int:
    """The highest number among the history's ``<prefix><n>`` call ids, at least its count of calls.

    The context view may leave out an old call whose result a later call shows again, so the count
    alone could repeat a number of the current turn; the highest number never does.
    """
    own = re.compile(re.escape(prefix) + r"([0-9]+)")
    numbers = [int(match[1]) for entry in history for call in entry.get("tool_calls") or []
               if (match := own.fullmatch(str(call.get("id", ""))))]
    return max([turn.calls_in_history, *numbers])


def plan(history: list[Entry], *, call_id_prefix: str = CALL_ID_PREFIX) -> PlannerReply:
    """The next step for the last user message, given the tool results that followed it."""
    # Call ids are unique within one history only: where they must be unique across sessions (the
    # agent's tool_calls table), pass a per-session call_id_prefix.
    turn = last_turn(history)
    if turn is None:
        return PlannerReply(HELP)
    if turn.text.strip().lower() in HELP_WORDS:
        return PlannerReply(HELP)
    if turn.text.strip().lower() in CONTEXT_WORDS:
        return PlannerReply(describe_request(history))
    try:
        command = parse_command(turn.text)
    except CommandError as exc:
        return PlannerReply(f"{exc}\n\nType 'help' for the commands.")
    if command is None:
        return PlannerReply("I did not understand that. I am the offline planner and know these commands:\n\n"
                            + HELP)
    step = _Step(turn, call_id_prefix, _last_call_number(history, turn, call_id_prefix))
    if not turn.exchanges:
        if command.on_open_draft:
            return step.call("get_order_task", {})
        return step.calls(command.calls())
    waiting = [exchange.name for exchange in turn.exchanges if exchange.result is None]
    if waiting:
        return PlannerReply(f"Still waiting for the result of {', '.join(waiting)}.")
    last = turn.exchanges[-1]
    if command.on_open_draft and len(turn.exchanges) == 1 and last.name == "get_order_task":
        return _after_task(step, command, last)
    if command.beside:  # calls made side by side: each outcome
        return PlannerReply("\n\n".join(summarise(exchange) for exchange in turn.exchanges))
    return PlannerReply(summarise(last))


def _after_task(step: _Step, command: Command, task_call: Exchange) -> PlannerReply:
    """Second step of an open-draft command: act on the draft that get_order_task found."""
    status, task = outcome_of(task_call.result or {})
    if status != "succeeded":
        return PlannerReply(summarise(task_call))
    chosen = _choose_draft(task, command.draft_id)
    if isinstance(chosen, str):
        return PlannerReply(chosen)
    draft_id, revision = chosen
    if command.tool == "submit_order":
        return step.call("submit_order", {"draft_id": draft_id, "revision": revision})
    arguments = dict(command.arguments)
    if command.tool == "update_draft_line" and "expected_sku" not in arguments:
        sku = _sku_of_line(task, arguments["item_number"])
        if sku is None:
            return PlannerReply(f"I cannot see line {arguments['item_number']} of draft {draft_id}; read it with "
                                f"'show draft {draft_id} lines {arguments['item_number']}' or name its SKU: "
                                f"'set line {arguments['item_number']} to <sku> x{arguments['qty']}'.")
        arguments["expected_sku"] = sku
    return step.call(command.tool, {"draft_id": draft_id, "base_revision": revision, **arguments})


def _sku_of_line(task: dict[str, Any], item_number: int) -> str | None:
    """The SKU on line ``item_number`` of the task's draft as the view shows it (None if not shown)."""
    draft = task.get("draft") if isinstance(task.get("draft"), dict) else {}
    for line in draft.get("lines") or []:
        if isinstance(line, dict) and line.get("item_number") == item_number and isinstance(line.get("sku"), str):
            return line["sku"]
    return None


def _choose_draft(task: dict[str, Any], wanted: str | None) -> tuple[str, int] | str:
    """(draft_id, revision) of the draft to act on, or the text explaining why there is none."""
    candidates = list(task.get("candidates") or [])
    if task.get("status") == "ok" and isinstance(task.get("draft"), dict):
        candidates = [task["draft"]]
    elif task.get("status") != "ambiguous" or not candidates:
        return "This session has no open draft. Create one with 'draft for <customer_id>: <sku> x<qty>'."
    if wanted is not None:
        matching = [c for c in candidates if str(c.get("draft_id")).lower() == wanted.lower()]
        if not matching:
            return f"Draft {wanted} is not open in this session.\n" + describe_candidates(candidates)
        candidates = matching
    if len(candidates) > 1:
        return describe_candidates(candidates)
    return candidates[0]["draft_id"], candidates[0]["revision"]
