"""PREPARE and COMMIT of the write tools (SPEC §3, §10), each one database transaction.

prepare: check the requester (the gateway's assertion for ``requested_by`` in the session and that call, valid
when the command was stored; an edit, signed by the approval service with its grant key, takes requester and
assertion from the ledger's record of the version it supersedes), run the domain's prepare
for that requester (a draft or an order that is not theirs is not_found: ``domain.owners``),
store the operation (arguments, fingerprint, facts, preview, requester, assertion) and, in the same transaction,
put ``cmd.approval.request`` built from that record and signed with the ledger key in the outbox (the approval
service acts on no request the ledger did not sign: ``erpilot_platform.ledger_signatures``); answer the preview.
A business rejection stores no operation and asks for nothing; like every answer it is kept under the operation
id and given again to a redelivery.

commit (sent by the approval service's outbox with the decision): verify the grant (signature, operation,
fingerprint, not consumed), lock the operation and then the rows the tool needs, re-check the facts, apply the
effect, record the outcome, consume the grant and put ``evt.erp.operation_finished`` in the outbox, all in one
transaction. A commit of a finished operation answers its recorded status and does nothing else.

A commit refused before any effect (a grant that does not verify or names another operation, a grant already
used, another fingerprint, an operation never prepared) is ``InvalidMessage``: dead-lettered, nothing changes and
nothing is published. It must not finish the agent's call: anyone who can put a message on ``cmd.erp.commit``
could then end a real call (as failed) that is still waiting for, or about to receive, its genuine commit. Only
the outcome of a commit under a valid grant is told, and the approval service sends exactly one per decision.
"""

from __future__ import annotations

import logging
from datetime import datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from erpilot_contracts import subjects
from erpilot_contracts.erp.v1 import CommitOperationV1, OperationStatusV1, PreparedOperationV1, PrepareOperationV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.tools.v1 import get_tool
from erpilot_erp.domain import operations as domain
from erpilot_erp.domain.errors import BusinessError
from erpilot_erp.domain.plans import StockCheck
from erpilot_erp.service_layer import to_domain
from erpilot_erp.service_layer.messages import approval_request, operation_status
from erpilot_erp.service_layer.ports import Ledger, NewOperation, Outcome, Work
from erpilot_erp.service_layer.replies import answered, business_error, business_refusal, normalised, once
from erpilot_erp.service_layer.requesters import Clock, Requesters, utc_now
from erpilot_erp.service_layer.write_state import write_state
from erpilot_platform.deliveries import stored_at
from erpilot_platform.failpoints import failpoint
from erpilot_platform.grants import verify_edit, verify_grant
from erpilot_platform.ledger_signatures import sign_request
from erpilot_platform.refusals import InvalidMessage, Refused
from erpilot_platform.telemetry import commit_outcomes, step

log = logging.getLogger(__name__)


class OperationService:
    def __init__(self, ledger: Ledger, verify_key: Ed25519PublicKey, requesters: Requesters,
                 ledger_key: Ed25519PrivateKey, *, default_stock_check: StockCheck = "exact", clock: Clock = utc_now):
        self.unit = ledger
        self.verify_key = verify_key
        self.ledger_key = ledger_key
        self.requesters = requesters
        self.default_stock_check = default_stock_check
        self.clock = clock

    # --- prepare ------------------------------------------------------------------------------------
    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        if cmd.tool not in domain.WRITE_TOOLS:
            raise Refused("not_a_write_tool", f"{cmd.tool} is not a write tool", 422)
        if cmd.tool_schema_version != get_tool(cmd.tool).schema_version:
            raise Refused("unsupported_schema_version", f"{cmd.tool} has no schema_version {cmd.tool_schema_version}",
                          422)
        if normalised(cmd.tool, cmd.arguments) != cmd.arguments:
            raise Refused("invalid_arguments", "arguments must be sent in normalised form", 422)
        if fingerprint(cmd.tool, cmd.tool_schema_version, cmd.arguments) != cmd.fingerprint:
            raise Refused("fingerprint_mismatch", "the fingerprint does not match tool and arguments", 422)
        asked = {"fingerprint": cmd.fingerprint, "session_id": cmd.session_id, "call_id": cmd.call_id}
        if cmd.supersedes is not None:
            asked["supersedes"] = cmd.supersedes

        async def work(unit: Work) -> PreparedOperationV1 | Refused:
            return await once(unit, f"prepare:{cmd.operation_id}", asked, PreparedOperationV1,
                              lambda: self._prepare(unit, cmd))

        with step("erp", "prepare", session_id=cmd.session_id, call_id=cmd.call_id, operation_id=cmd.operation_id):
            result = await self.unit.run(work)
        failpoint("erp.prepare.after_db_commit")
        return answered(result)

    async def _prepare(self, unit: Work, cmd: PrepareOperationV1) -> PreparedOperationV1:
        now = self.clock()
        requested_by, assertion, asserted_at = await self._requester(unit, cmd, now)
        if cmd.supersedes is None:
            await self._first_of_its_call(unit, cmd)
        # the domain refuses a draft or an order that is not the vouched requester's as not_found (domain.owners)
        state = await write_state(unit.ledger, cmd.tool, cmd.arguments, cmd.session_id, requested_by=requested_by)
        try:
            prepared = domain.prepare(to_domain.write(cmd.tool, cmd.arguments), state, now,
                                      stock_check=cmd.stock_check or self.default_stock_check)
        except BusinessError as exc:
            raise business_refusal(exc) from None
        record = await unit.ledger.insert_operation(NewOperation(
            operation_id=cmd.operation_id, tool=cmd.tool, tool_schema_version=cmd.tool_schema_version,
            session_id=cmd.session_id, call_id=cmd.call_id, requested_by=requested_by, assertion=assertion,
            asserted_at=asserted_at, supersedes=cmd.supersedes, arguments=cmd.arguments, fingerprint=cmd.fingerprint,
            facts=prepared.facts, preview=prepared.preview, prepared_at=now))
        await unit.emit(subjects.APPROVAL_CMD_REQUEST, sign_request(approval_request(record, cmd.agent_reason),
                                                              self.ledger_key),
                     msg_id=f"approval.request.{record.operation_id}")
        failpoint("erp.prepare.before_db_commit")  # operation and its outboxed request written, not committed
        return PreparedOperationV1.model_validate({"operation_id": record.operation_id, "tool": record.tool,
                                                   "fingerprint": record.fingerprint, "preview": prepared.preview})

    @staticmethod
    async def _first_of_its_call(unit: Work, cmd: PrepareOperationV1) -> None:
        """At most one operation per call: a direct call's assertion vouches for one call, and without this the
        agent could prepare any number of writes under it (new operation ids, other arguments), each asked for in
        the person's name and each approved by a standing approval. A retry repeats the operation id (``once``
        answers it before this); an edit supersedes its version. The unique index ``uq_operations_call`` (0004)
        holds the rule against a concurrent prepare."""
        earlier = await unit.ledger.operation_for_call(cmd.session_id, cmd.call_id)
        if earlier is not None and earlier.operation_id != cmd.operation_id:
            raise InvalidMessage("call_already_prepared", f"call {cmd.call_id} of this session was already prepared "
                                                          f"as operation {earlier.operation_id}")

    async def _requester(self, unit: Work, cmd: PrepareOperationV1, now: datetime) -> tuple[str, str, datetime]:
        """Who asked, the assertion that says so and when it was accepted.

        A new operation: the command's ``requested_by``, vouched for by its assertion for this call when JetStream
        stored the command (``deliveries.stored_at``, a time no publisher chooses), so a prepare redelivered after a
        crash still verifies with a direct call's short-lived assertion. An edit (``supersedes``,
        sent by the approval service, which checked the editor): the requester, assertion and acceptance time of the
        version it replaces, from the ledger's own record, so an edit can neither change nor invent who asked.
        """
        if cmd.supersedes is None:
            asserted_at = stored_at(now)
            self.requesters.vouch(cmd.assertion, session_id=cmd.session_id, call_id=cmd.call_id, tool=cmd.tool,
                                  requested_by=cmd.requested_by, at=asserted_at, args=cmd.fingerprint)
            return cmd.requested_by, cmd.assertion, asserted_at
        if not cmd.edit_signature:  # the agent may publish cmd.erp.prepare too: an edit is the approval service's
            raise InvalidMessage("edit_signature_missing", "an edit (supersedes) is taken only from the approval "
                                                           "service, with its signature")
        if not verify_edit(cmd, self.verify_key):
            raise InvalidMessage("edit_signature_invalid", "the edit's signature does not verify (another key, or a "
                                                           "field changed since it was signed)")
        old = await unit.ledger.operation(cmd.supersedes)
        if old is None or (old.session_id, old.call_id, old.tool) != (cmd.session_id, cmd.call_id, cmd.tool):
            raise InvalidMessage("supersedes_unknown", f"operation {cmd.supersedes} is not an earlier version of "
                                                       f"call {cmd.call_id} of this session with tool {cmd.tool}")
        if old.assertion is None or old.asserted_at is None:
            raise InvalidMessage("assertion_missing", f"operation {cmd.supersedes} holds no requester assertion")
        return old.requested_by, old.assertion, old.asserted_at

    # --- commit -------------------------------------------------------------------------------------
    async def commit(self, cmd: CommitOperationV1) -> OperationStatusV1:
        grant = cmd.grant
        with step("erp", "commit", operation_id=cmd.operation_id, pending_id=grant.pending_id):
            try:
                if not verify_grant(grant, self.verify_key):
                    raise InvalidMessage("invalid_grant",
                                         "the grant's signature does not verify; nothing was committed")
                if grant.operation_id != cmd.operation_id:
                    raise InvalidMessage("grant_for_another_operation",
                                         "the grant was issued for another operation; nothing was committed")
                status, replayed = await self.unit.run(lambda unit: self._commit(unit, cmd))
            except InvalidMessage as refusal:
                commit_outcomes.add(1, {"status": "refused", "code": refusal.reason})
                raise
        failpoint("erp.commit.after_db_commit")
        if not replayed:  # a replayed outcome was counted when it happened
            commit_outcomes.add(1, {"status": status.status, "code": status.error.code if status.error else ""})
        return status

    async def _commit(self, unit: Work, cmd: CommitOperationV1) -> tuple[OperationStatusV1, bool]:
        """The outcome, and whether it only repeats an outcome recorded earlier."""
        grant = cmd.grant
        op = await unit.ledger.operation(cmd.operation_id, lock=True)
        if op is None:
            raise InvalidMessage("never_prepared", f"operation {cmd.operation_id} was never prepared")
        if grant.fingerprint != op.fingerprint:
            raise InvalidMessage("operation_conflict",
                                 f"operation {cmd.operation_id} was prepared with another fingerprint")
        if op.status != "prepared":  # already finished: the recorded outcome, no second effect
            return operation_status(op), True
        if not await unit.ledger.consume_grant(grant.pending_id, op.operation_id):
            raise InvalidMessage("grant_already_used", f"grant {grant.pending_id} was already used")
        state = await write_state(unit.ledger, op.tool, op.arguments, op.session_id, requested_by=op.requested_by,
                                  facts=op.facts, lock=True)
        kind = domain.NEW_ID_KIND.get(op.tool)
        new_id = await unit.ledger.next_id(kind) if kind else None
        try:
            plan = domain.commit(to_domain.write(op.tool, op.arguments), op.facts, state, self.clock(),
                                 stock_check=grant.stock_check or "exact", new_id=new_id)
        except BusinessError as exc:
            log.info("operation %s rejected: %s", op.operation_id, exc)
            outcome = Outcome("rejected", grant.pending_id, grant.decided_by, error=business_error(exc))
        else:
            await unit.ledger.apply_plan(plan, operation_id=op.operation_id)
            outcome = Outcome("committed", grant.pending_id, grant.decided_by, result=plan.result)
        status = operation_status(await unit.ledger.finish_operation(op.operation_id, outcome))
        await unit.emit(subjects.ERP_EVT_OPERATION_FINISHED, status, msg_id=f"erp.operation_finished.{op.operation_id}")
        failpoint("erp.commit.before_db_commit")  # effect, result and consumed grant written, not committed
        return status, False
