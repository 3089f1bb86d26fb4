"""``cmd.approval.edit``: new arguments become a new pending version of the same call; the old one ends
``superseded``. The ledger prepares the new version, as it prepares every write (one orchestrator):

1. the checks (role, separation of duties, arguments; then under the old row's lock: state, deadline,
   fingerprint) and, in that same transaction, the edit intent (``approval.edits``);
2. ``cmd.erp.prepare`` with ``supersedes`` (the old operation) and ``edited_by``, no transaction held: the ERP
   takes the requester and the assertion from its own record of the old operation and sends the new version
   back through its outbox as ``cmd.approval.request`` with ``supersedes``;
3. ``service_layer.requests`` accepts that request only against the intent, and replaces the old version if it
   is still pending (or records on the intent why not);
4. this handler waits, bounded, for the new version or the intent's outcome, and answers it.

The new ``operation_id`` is derived from the old ``pending_id`` and the new fingerprint, so a retried edit
(redelivery, a timeout, the person pressing again) finds its intent, asks the ERP for the operation it already
prepared (idempotent there) and finds the version it made: the same person repeating the same edit gets that
version back (201) instead of 409 ``superseded``.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from erpilot_approval.domain.approvals import ApprovalError, PendingApproval
from erpilot_approval.domain.edits import EditIntent, check_edit, edited_operation_id
from erpilot_approval.domain.permissions import authorize
from erpilot_approval.service_layer.common import expire_if_due, not_found, refused
from erpilot_approval.service_layer.mapping import record_for
from erpilot_approval.service_layer.ports import Ports, Work
from erpilot_contracts.approval.v1 import Actor, ApprovalRecordV1, EditApprovalV1
from erpilot_contracts.erp.v1 import PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint as compute_fingerprint
from erpilot_platform.broker import ReplyError, TransientError
from erpilot_platform.failpoints import failpoint
from erpilot_platform.grants import sign_edit
from erpilot_platform.refusals import Refused
from erpilot_platform.tool_arguments import normalised_arguments

# How long an edit waits for the ledger's request to come back through the ERP's outbox and this service's
# request consumer (milliseconds when all is well). Past it the command is retried (``TransientError``): the
# retry finds its intent and the version, if it was made meanwhile.
WAIT_SECONDS = 10.0
FIRST_POLL_SECONDS, LONGEST_POLL_SECONDS = 0.005, 0.1


class _Edit:
    """One edit request once its arguments are validated."""

    def __init__(self, ports: Ports, cmd: EditApprovalV1, old: PendingApproval, arguments: dict):
        self.ports, self.cmd, self.old, self.arguments = ports, cmd, old, arguments
        self.fingerprint = compute_fingerprint(old.tool, old.tool_schema_version, arguments)
        self.operation_id = edited_operation_id(cmd.pending_id, self.fingerprint)

    @property
    def actor(self) -> Actor:
        return self.cmd.actor

    async def record_intent(self, unit: Work) -> ApprovalRecordV1 | Refused | None:
        """Under the old row's lock: the version a repeat of this edit already made, a refusal, or None (the
        intent is recorded: go on)."""
        old = await unit.approvals.get(self.cmd.pending_id, lock=True)
        now = await unit.now()
        if (old.status == "superseded" and old.decided_by == self.actor.sub
                and self.cmd.fingerprint == old.fingerprint):
            newer = await unit.approvals.get(old.superseded_by) if old.superseded_by else None
            if newer is not None and newer.operation_id == self.operation_id:
                return record_for(newer, self.actor.sub, self.actor.roles, now)
        try:
            check_edit(old, self.cmd.fingerprint, self.actor.sub, self.actor.roles, now)
        except ApprovalError as error:
            if error.code == "expired":
                await expire_if_due(unit, old, now)  # committed with the refusal's transaction
            return refused(error)
        intent = EditIntent(operation_id=self.operation_id, pending_id=old.pending_id, editor=self.actor.sub,
                            fingerprint=self.fingerprint, arguments=self.arguments, created_at=now)
        if not await unit.edits.add(intent) and (await unit.edits.get(self.operation_id)).editor != self.actor.sub:
            return Refused("superseded", "another person is replacing this version with the same arguments", 409)
        return None

    async def prepare(self) -> None:
        """Ask the ledger to prepare the edited operation; a refusal there ends the edit (and its intent)."""
        old = self.old
        try:
            # signed: the ERP takes `supersedes` from this service only (the agent may publish the subject too)
            prepared = await self.ports.erp.prepare(sign_edit(PrepareOperationV1(
                operation_id=self.operation_id, session_id=old.session_id, call_id=old.call_id, tool=old.tool,
                tool_schema_version=old.tool_schema_version, arguments=self.arguments,
                fingerprint=self.fingerprint, requested_by=old.requested_by,
                stock_check=self.ports.policy.for_tool(old.tool).stock_check,
                supersedes=old.operation_id, edited_by=self.actor.sub), self.ports.signing_key))
        except ReplyError as refusal:  # the ERP answered: it stored nothing, so no request will come
            await self.ports.unit.run(lambda unit: unit.edits.forget(self.operation_id))
            error = refusal.error  # a business rejection conflicts with the ledger's state; 5xx: the ERP failed
            status = error.status if error.status in (403, 422) else 409 if error.status < 500 else 502
            raise Refused(error.code, error.message, status, **(error.details or {})) from None
        if (prepared.operation_id, prepared.fingerprint) != (self.operation_id, self.fingerprint):
            raise Refused("erp_mismatch", "the ERP prepared another operation or fingerprint", 502)

    async def new_version(self) -> ApprovalRecordV1:
        """The version the ledger's request made, or the refusal the intent recorded; waits for either."""
        deadline, pause = time.monotonic() + WAIT_SECONDS, FIRST_POLL_SECONDS

        async def look(unit: Work) -> tuple[PendingApproval | None, EditIntent | None, datetime]:
            return (await unit.approvals.get_by_operation(self.operation_id),
                    await unit.edits.get(self.operation_id), await unit.now())

        while True:
            new, intent, now = await self.ports.unit.read(look)
            if new is not None:
                return record_for(new, self.actor.sub, self.actor.roles, now)
            if intent is not None and intent.refusal is not None:
                raise Refused(intent.refusal["code"], intent.refusal["message"], intent.refusal["status"])
            if time.monotonic() >= deadline:
                raise TransientError(f"the ledger's request for edit {self.operation_id} did not arrive "
                                     f"within {WAIT_SECONDS:.0f} s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, LONGEST_POLL_SECONDS)


async def edit(cmd: EditApprovalV1, ports: Ports) -> ApprovalRecordV1:
    """Replace the arguments: the ledger prepares a new pending version that supersedes this one.

    Check (role, arguments, then state, deadline and fingerprint with the intent), ask the ledger to prepare
    the edited operation, and answer the new version it asked for."""
    old = await ports.unit.read(lambda unit: unit.approvals.get(cmd.pending_id))
    if old is None:
        raise not_found(cmd.pending_id)
    try:
        authorize(old, "approve", cmd.actor.sub, cmd.actor.roles)
    except ApprovalError as error:
        raise refused(error) from None
    arguments = normalised_arguments(old.tool, cmd.arguments)
    job = _Edit(ports, cmd, old, arguments)

    outcome = await ports.unit.run(job.record_intent)
    if isinstance(outcome, Refused):
        raise outcome
    if outcome is not None:
        return outcome
    failpoint("approval.edit.after_intent")  # the intent is committed; the ERP is not asked yet
    await job.prepare()  # no transaction or lock is held while the ERP works
    return await job.new_version()
