"""The building blocks of the `erpilot context-eval` scenarios (``scenarios``): the ERP's results in
the shapes of SPEC §2 with values derived from fixed hashes, and ``Script``, which writes a stored history
turn by turn.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from erpilot.context_eval.facts import Fact
from erpilot_agent.context import Exchange, summarise

Entry = dict[str, Any]
CHECK_CODE = "Prüfcode K7-ALPHA-93"
LONG_NAMES = ["Müller & Söhne Maschinenbau GmbH & Co. KG", "Établissements Dupont-Lefèvre et Fils S.A.R.L.",
              "Nordwind Handelsgesellschaft mbH", "Kowalski i Wspólnicy Spółka Jawna",
              "Van der Berg Logistiek en Opslag B.V.", "Østergaard Industri & Service ApS"]


def _digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def sku(n: int) -> str:
    return f"SKU-{_digest('sku', n)[:6].upper()}"


def product(n: int, on_hand: int | None = None) -> dict[str, Any]:
    return {"sku": sku(n), "name": f"Bauteil {_digest('name', n)[:4].upper()} Nr. {n}",
            "status": "active", "price_minor": 100 + int(_digest("price", n)[:4], 16) % 9000, "currency": "EUR",
            "on_hand": int(_digest("stock", n)[:4], 16) % 900 if on_hand is None else on_hand}


def catalog(count: int = 50) -> dict[str, Any]:
    return {"items": [product(n) for n in range(count)]}


def customer(n: int) -> dict[str, Any]:
    name = LONG_NAMES[n] if n < len(LONG_NAMES) else f"Kunde {n} Handels- und Vertriebsgesellschaft mbH"
    return {"customer_id": f"C-{1001 + n}", "name": name, "discount_pct": n % 4 * 5}


def customers(count: int = 30) -> dict[str, Any]:
    return {"items": [customer(n) for n in range(count)]}


def qty(draft_id: str, n: int) -> int:
    return int(_digest("qty", draft_id, n)[:4], 16) % 97 + 1


def draft(draft_id: str, revision: int, line_count: int, *, customer_n: int = 0, status: str = "open",
          changed: dict[int, int] | None = None) -> dict[str, Any]:
    lines = []
    for n in range(1, line_count + 1):
        item = product(int(_digest("line", draft_id, n)[:3], 16) % 50)
        quantity = (changed or {}).get(n, qty(draft_id, n))
        lines.append({"item_number": n, "sku": item["sku"], "name": item["name"], "qty": quantity,
                      "unit_price_minor": item["price_minor"], "discount_pct": 0,
                      "line_total_minor": item["price_minor"] * quantity, "stock_before": item["on_hand"]})
    who = customer(customer_n)
    return {"draft_id": draft_id, "revision": revision, "status": status, "customer_id": who["customer_id"],
            "customer_name": who["name"], "lines": lines,
            "total_amount_minor": sum(line["line_total_minor"] for line in lines), "currency": "EUR",
            "note": None, "valid_until": "2026-12-02T09:00:00+00:00", "created_at": "2026-12-01T09:00:00+00:00"}


def line_of(revision: dict[str, Any], item_number: int) -> dict[str, Any]:
    return revision["lines"][item_number - 1]


def ok(result: dict[str, Any]) -> dict[str, Any]:
    return {"status": "succeeded", "result": result}


def rejected(code: str, message: str) -> dict[str, Any]:
    return {"status": "business_rejected", "error": {"code": code, "message": message}}


class Script:
    """Builds a stored history turn by turn; call ids are ``call-<n>`` in order.

    ``as_agent_stores``: the ids the agent stores instead, ``<run_id>:rules-<n>`` with the model's own
    ``rules-<n>`` beside it (``model_id``), a new run for every user message.
    """

    def __init__(self, *, as_agent_stores: bool = False) -> None:
        self.entries: list[Entry] = []
        self.calls = 0
        self.as_agent_stores = as_agent_stores
        self.run_id = "run_0"

    def user(self, text: str) -> Script:
        self.entries.append({"role": "user", "content": text})
        self.run_id = f"run_{_digest('run', len(self.entries))[:32]}"
        return self

    def _call_id(self) -> dict[str, str]:
        self.calls += 1
        if self.as_agent_stores:
            return {"id": f"{self.run_id}:rules-{self.calls}", "model_id": f"rules-{self.calls}"}
        return {"id": f"call-{self.calls}"}

    def answer(self, text: str) -> Script:
        self.entries.append({"role": "assistant", "content": text})
        return self

    def call(self, *calls: tuple[str, dict[str, Any], dict[str, Any]]) -> Script:
        """One assistant message with these (tool, arguments, content) calls, then their results."""
        ids = [self._call_id() for _ in calls]
        self.entries.append({"role": "assistant", "content": None, "tool_calls": [
            {**call_id, "type": "function",
             "function": {"name": tool, "arguments": json.dumps(args, ensure_ascii=False)}}
            for call_id, (tool, args, _) in zip(ids, calls, strict=True)]})
        for call_id, (_, _, content) in zip(ids, calls, strict=True):
            self.entries.append({"role": "tool", "tool_call_id": call_id["id"],
                                 "content": json.dumps(content, ensure_ascii=False)})
        return self

    def rules_run(self, text: str, *calls: tuple[str, dict[str, Any], dict[str, Any]]) -> Script:
        """A run of the rules model: the message, its calls side by side, the planner's summary of each."""
        self.user(text).call(*calls)
        answers = [summarise(Exchange(f"call-{n}", tool, args, content))
                   for n, (tool, args, content) in enumerate(calls)]
        return self.answer("\n\n".join(answers))

    def run(self, text: str, tool: str, args: dict[str, Any], content: dict[str, Any], answer: str) -> Script:
        return self.user(text).call((tool, args, content)).answer(answer)

    def listing(self, what: str = "product") -> Script:
        if what == "product":
            return self.run("find product", "search_products", {"query": ""}, ok(catalog()), "Found 50 products.")
        return self.run("find customer", "search_customers", {"query": ""}, ok(customers()),
                        "Found 30 customers.")

    def product_read(self, n: int) -> Script:
        return self.run(f"show product {sku(n)}", "get_product", {"sku": sku(n)}, ok(product(n)),
                        f"{sku(n)} is in stock.")


@dataclass
class Scenario:
    name: str
    covers: str
    history: list[Entry]
    facts: list[Fact] = field(default_factory=list)
    budget_tokens: int = 4000
