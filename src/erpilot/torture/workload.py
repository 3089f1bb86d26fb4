"""One `erpilot torture` run carried out through the HTTP API: its plan (``plan``: a seeded mix of tool calls and
decisions, drawn up front) made into calls, decisions and waits. What the plan needs from the ledger it makes
itself before the failpoint is armed (`Workload.prepare`): stock topped up, and the orders it will cancel or
refund.

Every request is watched: when the armed service dies at its failpoint, the process group is SIGKILLed
and the service restarted (disarmed) while the request is still waiting; a request the crash broke
is repeated as a person would (same `call_id`, same decision), which the API must answer idempotently.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from erpilot.stack import tokens
from erpilot.torture.plan import REFUND_CAP, SKUS, Action, Plan
from erpilot.torture.stack import TortureStack

ATTEMPTS = 6
LOW_STOCK = 60  # below this, prepare() tops a product up first (so earlier runs cannot starve this one)
RESTOCK = 200


@dataclass
class Call:
    """One tool call of the run, with what the API answered along the way."""

    session_id: str
    call_id: str
    tool: str
    intent: str | None = None  # approve | reject | edit | expire (writes only)
    pending_ids: list[str] = field(default_factory=list)
    approved_by_api: bool = False  # a decision `approve` was answered 200 `approved`
    problems: list[str] = field(default_factory=list)


class Driver:
    def __init__(self, ts: TortureStack, target: str, client: httpx.AsyncClient, tokens_: dict[str, str]):
        self.ts = ts
        self.target = target
        self.client = client
        self.tokens = tokens_
        self.crashes: list[int] = []
        self.other_exits: list[str] = []
        self.notes: list[str] = []
        self._lock = asyncio.Lock()

    async def recover(self) -> None:
        """If the armed service died, SIGKILL its group and restart it disarmed (once per crash)."""
        async with self._lock:
            # The supervisor's look comes first and leaves out the armed service: had the target died at its
            # failpoint between reading its exit code and that look, it was reported as "another process".
            # Looked at in this order, a target the supervisor saw exit has its exit code read just after.
            others = self.ts.unexpected_exits(besides=self.target)
            code = self.ts.exit_code(self.target)
            if code is not None:
                self.crashes.append(code)
                self.ts.disarm(self.target)
                self.ts.kill(self.target)  # SIGKILL the rest of its group; not reported as unexpected
            self.other_exits += others
            if code is not None:
                await asyncio.to_thread(self.ts.restart, self.target)

    async def send(self, who: str, method: str, path: str, body: dict | None = None) -> httpx.Response | None:
        """Send, restarting a crashed service meanwhile; repeat after a crash-made 5xx or timeout."""
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        for _ in range(ATTEMPTS):
            task = asyncio.create_task(self.client.request(method, path, json=body, headers=headers))
            while not task.done():
                await asyncio.wait({task}, timeout=0.2)
                await self.recover()
            try:
                response = task.result()
            except httpx.HTTPError:
                response = None
            if response is not None and response.status_code < 500:
                return response
            await self.recover()
            await asyncio.sleep(0.5)
        return None

    async def call(self, session_id: str, tool: str, arguments: dict, call: Call | None = None) -> tuple[Call, dict]:
        call = call or Call(session_id, f"torture-{uuid.uuid4().hex}", tool)
        response = await self.send("requester", "POST", f"/v1/sessions/{session_id}/tool-calls",
                                   {"tool": tool, "arguments": arguments, "call_id": call.call_id})
        if response is None or response.status_code not in (200, 202):
            call.problems.append(f"{tool} call answered {_describe(response)}")
            return call, {}
        answer = response.json()
        if answer.get("pending_id"):
            call.pending_ids.append(answer["pending_id"])
        return call, answer

    async def decide(self, call: Call, pending: dict, action: str) -> None:
        response = await self.send("decider", "POST", f"/v1/approvals/{pending['pending_id']}/decision",
                                   {"action": action, "fingerprint": pending["fingerprint"], "comment": "torture"})
        if response is None or response.status_code not in (200, 409):
            call.problems.append(f"decision {action} answered {_describe(response)}")
        elif response.status_code == 200 and response.json().get("status") == "approved":
            call.approved_by_api = True

    async def edit(self, call: Call, pending: dict, arguments: dict) -> dict | None:
        # Separation of duties covers edits: the editor is a party and may not approve its own version.
        response = await self.send("editor", "POST", f"/v1/approvals/{pending['pending_id']}/edit",
                                   {"fingerprint": pending["fingerprint"], "arguments": arguments})
        if response is None or response.status_code not in (201, 409):
            call.problems.append(f"edit answered {_describe(response)}")
            return None
        if response.status_code == 409:
            return None
        record = response.json()
        call.pending_ids.append(record["pending_id"])
        return record

    async def view(self, call: Call) -> dict | None:
        response = await self.send("requester", "GET", f"/v1/sessions/{call.session_id}/tool-calls/{call.call_id}")
        return response.json() if response is not None and response.status_code == 200 else None

    async def wait_finished(self, calls: list[Call], timeout: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        waiting = list(calls)
        while waiting and asyncio.get_running_loop().time() < deadline:
            waiting = [c for c in waiting if ((await self.view(c)) or {}).get("status") != "finished"]
            if waiting:
                await asyncio.sleep(0.3)


class Workload:
    """One run's plan carried out: `prepare` (disarmed), then `run` (armed); both return the calls they made."""

    def __init__(self, driver: Driver, plan_: Plan, *, expiry_ttl: float):
        self.driver = driver
        self.plan = plan_
        self.expiry_ttl = expiry_ttl
        self.calls: list[Call] = []
        self.placed: list[dict | None] = []  # the prepared orders' results (order_id, paid_minor), by index

    async def prepare(self, stock: dict[str, int]) -> list[Call]:
        """Before arming: top up every product below LOW_STOCK, then place and approve the plan's orders."""
        session_id = await self._session()
        await asyncio.gather(*(self._write(session_id, "adjust_stock", {
            "sku": sku, "delta": RESTOCK, "reason": "torture restock"}, "approve")
            for sku in SKUS if stock.get(sku, 0) < LOW_STOCK))
        placed = await asyncio.gather(*(self._order(session_id, customer, lines, "approve")
                                        for customer, lines in self.plan.orders))
        await self.driver.wait_finished([c for c in self.calls], timeout=90)
        for call in placed:
            view = await self.driver.view(call) if call is not None else None
            self.placed.append(view["result"] if view and view.get("outcome") == "succeeded" else None)
        calls, self.calls = self.calls, []
        return calls

    async def run(self) -> list[Call]:
        session_id = await self._session()
        await asyncio.gather(*(self._action(session_id, action) for action in self.plan.actions))
        return self.calls  # concurrently: the crash meets several requests in flight

    async def _session(self) -> str:
        session = await self.driver.send("requester", "POST", "/v1/sessions", {})
        if session is None or session.status_code != 201:
            raise RuntimeError(f"could not open a session: {_describe(session)}")
        return session.json()["session_id"]

    async def _action(self, session_id: str, action: Action) -> None:
        await asyncio.sleep(action.delay)
        if action.kind == "order":
            await self._order(session_id, action.customer, action.lines, action.intent)
        elif action.kind == "adjust":
            await self._write(session_id, "adjust_stock", {"sku": action.sku, "delta": action.delta,
                                                           "reason": "torture"}, action.intent,
                              edited=lambda args: {**args, "delta": args["delta"] + 1})
        elif (order := self.placed[action.order]) is None:
            self.driver.notes.append(f"{action.kind}: its order could not be placed beforehand")
        elif action.kind == "cancel":
            await self._write(session_id, "cancel_order", {"order_id": order["order_id"], "reason": "torture"},
                              action.intent)
        else:
            amount = max(1, int(action.share * min(order["paid_minor"], REFUND_CAP)))
            await self._write(session_id, "refund_payment", {"order_id": order["order_id"], "amount_minor": amount,
                                                             "currency": "EUR", "channel": "original"}, action.intent,
                              edited=lambda args: {**args, "amount_minor": max(1, args["amount_minor"] - 1)})

    async def _current(self, call: Call) -> dict:
        """The call's pending version as its view shows it (an edit whose answer a crash swallowed)."""
        view = await self.driver.view(call) or {}
        if view.get("approval_status") != "pending" or not view.get("pending_id"):
            return {}
        if view["pending_id"] not in call.pending_ids:
            call.pending_ids.append(view["pending_id"])
        return {"pending_id": view["pending_id"], "fingerprint": view["fingerprint"]}

    async def _order(self, session_id: str, customer: str, lines: tuple[tuple[str, int], ...],
                     intent: str) -> Call | None:
        draft, answer = await self.driver.call(session_id, "create_order_draft", {
            "customer_id": customer, "lines": [{"sku": sku, "qty": qty} for sku, qty in lines]})
        self.calls.append(draft)
        if answer.get("outcome") != "succeeded":
            return None  # a business rejection is a legitimate answer; a broken call is already noted
        revision = answer["result"]
        return await self._write(session_id, "submit_order",
                                 {"draft_id": revision["draft_id"], "revision": revision["revision"]}, intent)

    async def _write(self, session_id: str, tool: str, arguments: dict, intent: str,
                     edited: Callable[[dict], dict] | None = None) -> Call:
        call, pending = await self.driver.call(session_id, tool, arguments)
        call.intent = intent
        self.calls.append(call)
        if not pending.get("pending_id"):
            return call  # refused at prepare (a business rejection) or broken: the checks look at it
        if intent == "edit" and edited is not None:
            pending = await self.driver.edit(call, pending, edited(arguments)) or await self._current(call)
            if not pending:
                return call
            intent = "approve"
        if intent == "expire":
            await self.driver.wait_finished([call], timeout=self.expiry_ttl + 60)
        else:
            await self.driver.decide(call, pending, "approve" if intent == "approve" else "reject")
        return call


def make_tokens(secret: str, run: str) -> dict[str, str]:
    """The run's three people (separation of duties: the requester, an editor and a decider are distinct)."""
    return {"requester": tokens.make_token(secret, f"torture-req-{run}", ["requester"]),
            "editor": tokens.make_token(secret, f"torture-edit-{run}", ["approver", "manager", "admin"]),
            "decider": tokens.make_token(secret, f"torture-dec-{run}", ["approver", "manager", "admin"])}


def _describe(response: httpx.Response | None) -> str:
    if response is None:
        return "nothing (no answer after repeated attempts)"
    return f"{response.status_code}: {response.text[:200]}"

