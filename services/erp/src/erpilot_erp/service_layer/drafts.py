"""Draft tools (SPEC §2): each call makes one new immutable revision, exactly once per ``operation_id``.

An edit locks the draft row first, so two edits on one base revision serialise: the first makes the next
revision, the second then sees it and fails ``draft_changed``. The answer, a business rejection included,
is stored under the operation id and given again to a redelivered command.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, ToolResultV1
from erpilot_erp.domain.drafts import DRAFT_EDIT_TOOLS, CreateDraft, create_draft, edit_draft
from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.model import DraftRevision
from erpilot_erp.service_layer import to_domain
from erpilot_erp.service_layer.ports import Ledger, LedgerUnitOfWork
from erpilot_erp.service_layer.replies import once, rejected_tool
from erpilot_platform.failpoints import failpoint
from erpilot_platform.tool_arguments import normalised_or_refusal

DRAFT_TOOLS = DRAFT_EDIT_TOOLS | {"create_order_draft"}


class DraftService:
    def __init__(self, ledger: Ledger, *, quote_ttl: timedelta):
        self.ledger = ledger
        self.quote_ttl = quote_ttl

    async def handle(self, cmd: ExecuteToolV1) -> ReplyV1:
        """Run one draft tool; a redelivery of the same ``operation_id`` gets the first answer."""
        if cmd.tool not in DRAFT_TOOLS:
            return ReplyV1.failure("not_a_draft_tool", f"{cmd.tool} is not a draft tool", 422)
        args = normalised_or_refusal(cmd.tool, cmd.arguments)
        if isinstance(args, ReplyV1):
            return args
        asked = {"tool": cmd.tool, "arguments": args, "session_id": cmd.session_id}

        async def work(uow: LedgerUnitOfWork) -> ReplyV1:
            return await once(uow, f"draft:{cmd.operation_id}", asked, lambda: self._apply(uow, cmd, args))

        reply = await self.ledger.run(work)
        failpoint("erp.draft.after_db_commit")
        return reply

    async def _apply(self, uow: LedgerUnitOfWork, cmd: ExecuteToolV1, args: dict[str, Any]) -> ReplyV1:
        now = datetime.now(UTC)
        try:
            if cmd.tool == "create_order_draft":
                revision = await self._create(uow, cmd.session_id, to_domain.draft_creation(args), now)
            else:
                revision = await self._edit(uow, cmd.tool, cmd.session_id, args, now)
        except BusinessError as exc:
            return ReplyV1.success(rejected_tool(exc))
        await uow.repo.insert_revision(revision, operation_id=cmd.operation_id)
        return ReplyV1.success(ToolResultV1(outcome="succeeded", result=revision.to_result()))

    async def _create(self, uow: LedgerUnitOfWork, session_id: str, args: CreateDraft,
                      now: datetime) -> DraftRevision:
        customer = await uow.repo.customer(args.customer_id)
        products = await uow.repo.products_by_sku([sku for sku, _ in args.lines])
        draft_id = await uow.repo.next_id("draft")
        return create_draft(draft_id, session_id, customer, products, args, now, self.quote_ttl)

    async def _edit(self, uow: LedgerUnitOfWork, tool: str, session_id: str, args: dict[str, Any],
                    now: datetime) -> DraftRevision:
        latest = await uow.repo.latest_draft(args["draft_id"], lock=True)
        skus = {line.sku for line in latest.lines} if latest else set()
        if "sku" in args:
            skus.add(args["sku"])
        customer = await uow.repo.customer(latest.customer_id) if latest else None
        products = await uow.repo.products_by_sku(skus)
        return edit_draft(to_domain.draft_edit(tool, args), latest, session_id=session_id, customer=customer,
                          products=products, now=now, quote_ttl=self.quote_ttl)
