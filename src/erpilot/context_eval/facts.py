"""The facts `erpilot context-eval` looks for in a model request (a list of OpenAI chat messages).

A fact is present only when a model could read it from the request as sent: user text verbatim, or a
value inside a tool message's decoded JSON (a projection counts, an omitted marker does not).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Request = list[dict[str, Any]]


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object inside a decoded value, depth first."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from _objects(item)


def tool_results(request: Request) -> list[tuple[str, Any]]:
    """(tool name, decoded content) of every tool message, in request order."""
    names = {call["id"]: call["function"]["name"] for m in request for call in m.get("tool_calls") or []}
    results = []
    for message in request:
        if message.get("role") == "tool":
            try:
                content = json.loads(message.get("content") or "")
            except ValueError:
                content = None
            results.append((names.get(message.get("tool_call_id"), "?"), content))
    return results


def pairs_intact(request: Request) -> bool:
    """Every tool call is answered right after its message, and no tool message is without its call."""
    index = 0
    while index < len(request):
        calls = [call["id"] for call in request[index].get("tool_calls") or []]
        answers = [m.get("tool_call_id") for m in request[index + 1:index + 1 + len(calls)]]
        if answers != calls or any(m.get("role") != "tool" for m in request[index + 1:index + 1 + len(calls)]):
            return False
        if request[index].get("role") == "tool":
            return False
        index += 1 + len(calls)
    return True


class Fact:
    """Something the next step needs; ``present(request)`` says whether the request shows it."""

    def present(self, request: Request) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class UserSays(Fact):
    text: str

    def present(self, request: Request) -> bool:
        return any(m.get("role") == "user" and self.text in str(m.get("content")) for m in request)

    def describe(self) -> str:
        return f"user text {self.text!r}"


def _drafts(request: Request, draft_id: str, revision: int) -> Iterator[dict[str, Any]]:
    for _, content in tool_results(request):
        for obj in _objects(content):
            if obj.get("draft_id") == draft_id and obj.get("revision") == revision and "omitted" not in obj:
                yield obj


@dataclass(frozen=True)
class DraftLine(Fact):
    draft_id: str
    revision: int
    item_number: int
    sku: str
    qty: int

    def present(self, request: Request) -> bool:
        wanted = (self.item_number, self.sku, self.qty)
        return any((line.get("item_number"), line.get("sku"), line.get("qty")) == wanted
                   for draft in _drafts(request, self.draft_id, self.revision)
                   for line in draft.get("lines") or [] if isinstance(line, dict))

    def describe(self) -> str:
        return f"{self.draft_id} r{self.revision} line {self.item_number} = {self.sku} x{self.qty}"


@dataclass(frozen=True)
class DraftCustomer(Fact):
    draft_id: str
    revision: int
    name: str

    def present(self, request: Request) -> bool:
        for draft in _drafts(request, self.draft_id, self.revision):
            customer = draft.get("customer") if isinstance(draft.get("customer"), dict) else {}
            if self.name in (draft.get("customer_name"), customer.get("name")):
                return True
        return False

    def describe(self) -> str:
        return f"{self.draft_id} r{self.revision} customer {self.name!r}"


@dataclass(frozen=True)
class LatestResult(Fact):
    """The latest result of ``tool`` (for ``sku``, if given) holds ``key == value`` somewhere."""

    tool: str
    key: str
    value: Any
    sku: str | None = None

    def present(self, request: Request) -> bool:
        for tool, content in reversed(tool_results(request)):
            if tool != self.tool:
                continue
            objects = list(_objects(content))
            if self.sku is not None:
                objects = [o for o in objects if o.get("sku") == self.sku]
                if not objects:
                    continue
            return any(o.get(self.key) == self.value for o in objects)
        return False

    def describe(self) -> str:
        where = f" of {self.sku}" if self.sku else ""
        return f"latest {self.tool}{where}: {self.key} = {self.value!r}"


@dataclass(frozen=True)
class EveryUserMessage(Fact):
    """Every user message of the session, verbatim and in order (SPEC §8: never dropped or cut)."""

    texts: tuple[str, ...]

    def present(self, request: Request) -> bool:
        return tuple(str(m.get("content")) for m in request if m.get("role") == "user") == self.texts

    def describe(self) -> str:
        return f"all {len(self.texts)} user messages verbatim"
