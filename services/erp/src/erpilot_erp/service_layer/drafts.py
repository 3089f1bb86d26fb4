"""Draft tools (SPEC §2): each call makes one new immutable revision, exactly once per ``operation_id``.

An edit locks the draft row first, so two edits on one base revision serialise: the first makes the next
revision, the second then sees it and fails ``draft_changed``. The answer, a business rejection included,
is stored under the operation id before it is sent (``req.erp.draft`` is a core request no stream keeps, issue 31)
and given again to the agent's repeat of that operation id: its retry of an unanswered request, its run's next
drive, its pass over left calls.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from erpilot_contracts.erp.v1 import ExecuteToolV1, ToolResultV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import get_tool
from erpilot_erp.domain.drafts import DRAFT_EDIT_TOOLS, CreateDraft, create_draft, edit_draft
from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.model import DraftRevision
from erpilot_erp.service_layer import to_domain
from erpilot_erp.service_layer.ports import Ledger, Work
from erpilot_erp.service_layer.replies import answered, normalised, once, rejected_tool
from erpilot_erp.service_layer.requesters import Clock, Requesters, utc_now
from erpilot_platform.failpoints import failpoint
from erpilot_platform.refusals import InvalidMessage, Refused

DRAFT_TOOLS = DRAFT_EDIT_TOOLS | {"create_order_draft"}


class DraftService:
    def __init__(self, ledger: Ledger, requesters: Requesters, *, quote_ttl: timedelta, clock: Clock = utc_now):
        self.unit = ledger
        self.requesters = requesters
        self.quote_ttl = quote_ttl
        self.clock = clock

    async def handle(self, cmd: ExecuteToolV1) -> ToolResultV1:
        """Run one draft tool; a repeat of the same ``operation_id`` gets the first answer."""
        if cmd.tool not in DRAFT_TOOLS:
            raise Refused("not_a_draft_tool", f"{cmd.tool} is not a draft tool", 422)
        args = normalised(cmd.tool, cmd.arguments)
        asked = {"tool": cmd.tool, "arguments": args, "session_id": cmd.session_id}

        async def work(unit: Work) -> ToolResultV1 | Refused:
            return await once(unit, f"draft:{cmd.operation_id}", asked, ToolResultV1,
                              lambda: self._apply(unit, cmd, args))

        result = await self.unit.run(work)
        failpoint("erp.draft.after_db_commit")
        return answered(result)

    async def _apply(self, unit: Work, cmd: ExecuteToolV1, args: dict[str, Any]) -> ToolResultV1:
        now = self.clock()
        # Drafts belong to the session and the person that made them: the requester, vouched for by the gateway's
        # assertion (checked here, not taken from the agent), becomes a new draft's owner, and only the owner edits.
        # Checked now: the draft is a core request (no stream time to check at), so a repeat after the assertion
        # expired is refused unless it was stored before; a stored one is answered by ``once`` above, unchecked.
        self.requesters.vouch(cmd.assertion, session_id=cmd.session_id, call_id=cmd.call_id, tool=cmd.tool,
                              requested_by=cmd.requested_by, at=now,
                              args=fingerprint(cmd.tool, get_tool(cmd.tool).schema_version, args))
        await self._first_of_its_call(unit, cmd)
        try:
            if cmd.tool == "create_order_draft":
                revision = await self._create(unit, cmd.session_id, cmd.requested_by, to_domain.draft_creation(args),
                                              now)
            else:
                revision = await self._edit(unit, cmd.tool, cmd.session_id, cmd.requested_by, args, now)
        except BusinessError as exc:
            return rejected_tool(exc)
        await unit.ledger.insert_revision(revision, operation_id=cmd.operation_id)
        return ToolResultV1(outcome="succeeded", result=revision.to_result())

    @staticmethod
    async def _first_of_its_call(unit: Work, cmd: ExecuteToolV1) -> None:
        """At most one draft operation per call (as ``OperationService`` for writes): a direct call's assertion
        vouches for one call, so the agent may not make several drafts under it with new operation ids. The inbox
        holds the call's operation id under a key of its own (hashed: ids from the agent have no length bound), in
        this transaction; a retry repeats the operation id and ``once`` answers it before this."""
        key = "draft-call:" + hashlib.sha256(f"{cmd.session_id}\n{cmd.call_id}".encode()).hexdigest()
        claimed, recorded = await unit.claim(key)
        if claimed:
            await unit.record(key, {"operation_id": cmd.operation_id})
        elif (recorded or {}).get("operation_id") != cmd.operation_id:
            raise InvalidMessage("call_already_prepared", f"call {cmd.call_id} of this session already ran as "
                                                          f"operation {(recorded or {}).get('operation_id')}")

    async def _create(self, unit: Work, session_id: str, owner: str, args: CreateDraft,
                      now: datetime) -> DraftRevision:
        customer = await unit.ledger.customer(args.customer_id)
        products = await unit.ledger.products_by_sku([sku for sku, _ in args.lines])
        draft_id = await unit.ledger.next_id("draft")
        return create_draft(draft_id, session_id, customer, products, args, now, self.quote_ttl, owner=owner)

    async def _edit(self, unit: Work, tool: str, session_id: str, requested_by: str, args: dict[str, Any],
                    now: datetime) -> DraftRevision:
        latest = await unit.ledger.latest_draft(args["draft_id"], lock=True)
        skus = {line.sku for line in latest.lines} if latest else set()
        if "sku" in args:
            skus.add(args["sku"])
        customer = await unit.ledger.customer(latest.customer_id) if latest else None
        products = await unit.ledger.products_by_sku(skus)
        return edit_draft(to_domain.draft_edit(tool, args), latest, session_id=session_id, requested_by=requested_by,
                          customer=customer, products=products, now=now, quote_ttl=self.quote_ttl)
