"""``cmd.approval.request``: the ledger asks for a decision on an operation it prepared.

Only the ERP sends it, from its outbox, in the transaction that stored the prepared operation, built from its
own record (preview, arguments, fingerprint, requester, the requester's assertion) and signed with its ledger key.
What is checked here:

1. before anything else, the ledger's signature (``ledger_signatures.verify_request``): a request the ERP did not
   sign, or one changed since, is ``InvalidMessage`` (``ledger_signature_missing`` / ``ledger_signature_invalid``),
   dead-lettered, and nothing is stored or read. Without it, whoever can publish the subject (any process on a
   development stack's unauthenticated NATS) could send a request of its own, with a real operation id and
   fingerprint and an invented preview, before the ledger's, which would then only repeat it (step 3);
2. the requester assertion (``verify_assertion`` at ``asserted_at``, the moment the ledger accepted it, so a
   request relayed late is still honoured): a missing, forged or mismatched one is ``InvalidMessage``,
   dead-lettered, and nothing is stored;
3. a repeat of a stored request answers the stored record, whatever its status (another request under the same
   ``operation_id`` is 409 ``idempotency_conflict``);
4. an edit (``supersedes``) is accepted only against the intent this service recorded for it
   (``InvalidMessage("edit_not_requested")`` otherwise) and replaces the old version if it is still pending;
5. the policy in force (tool known and requiring approval, schema version, normalised arguments, fingerprint):
   a refusal stores nothing and emits ``evt.approval.request_refused``, so the agent can finish the call;
6. a new approval (not an edited version) that a standing approval in force covers is approved in the same
   transaction (``standing.approve_at_once``), its commit leaving through the outbox as a person's decision's does;
   a call of a chat run (the run its assertion vouches for, never the call id's word) only while the run has not
   ended and has had fewer than ``[standing] max_writes_per_run`` writes approved so.
"""

from __future__ import annotations

from datetime import datetime

from erpilot_approval.domain.approvals import ApprovalError, ApprovalRequest, PendingApproval, new_pending
from erpilot_approval.domain.edits import EditIntent, edited_version, is_requested, still_editable, supersede
from erpilot_approval.domain.policy import Policy
from erpilot_approval.service_layer.common import emit_requested, emit_resolved, expire_if_due, new_pending_id, refused
from erpilot_approval.service_layer.mapping import record_of, request_of
from erpilot_approval.service_layer.ports import Ports, Work
from erpilot_approval.service_layer.standing import approve_at_once, run_of, standing_for
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import ApprovalRecordV1, ApprovalRequestRefusedV1, RequestApprovalV1
from erpilot_contracts.base import ErrorV1
from erpilot_contracts.tools.v1 import get_tool
from erpilot_platform.assertions import RUN, Requester, require_vouched
from erpilot_platform.failpoints import failpoint
from erpilot_platform.idempotency import Decision, decide, request_digest
from erpilot_platform.ledger_signatures import verify_request
from erpilot_platform.refusals import InvalidMessage, Refused
from erpilot_platform.telemetry import step
from erpilot_platform.tool_arguments import normalised_arguments


def check_arguments(tool: str, schema_version: int, arguments: dict) -> None:
    """Refused unless ``arguments`` are exactly the normalised arguments of a known tool version."""
    normalised = normalised_arguments(tool, arguments)
    spec = get_tool(tool)
    if schema_version != spec.schema_version:
        raise Refused("invalid_request", f"{tool} has schema_version {spec.schema_version}", 422)
    if normalised != arguments:
        raise Refused("invalid_arguments", "arguments are not in normalised form", 422, expected=normalised)


def verify_ledger_signature(cmd: RequestApprovalV1, ports: Ports) -> None:
    """The ledger built and signed exactly this request (nothing the agent sends decides what a person sees)."""
    if not cmd.ledger_signature:
        raise InvalidMessage("ledger_signature_missing", "the approval request carries no ledger signature: only "
                                                         "the ERP's own requests are acted on")
    if not verify_request(cmd, ports.ledger_key):
        raise InvalidMessage("ledger_signature_invalid", "the approval request's ledger signature does not verify "
                                                         "(another key, or a field changed since it was signed)")


def verify_requester(cmd: RequestApprovalV1, ports: Ports) -> Requester:
    """The gateway vouched for ``requested_by`` in this session, for this call (or its run), when the ledger
    accepted the request."""
    return require_vouched(cmd.assertion, ports.assertion_key, session_id=cmd.session_id, sub=cmd.requested_by,
                           call_id=cmd.call_id, tool=cmd.tool, at=cmd.asserted_at)


def admit(request: ApprovalRequest, policy: Policy, now: datetime, pending_id: str,
          supersedes: str | None = None) -> PendingApproval:
    """The new pending approval under the policy in force, or ``Refused`` (the request's own problem)."""
    check_arguments(request.tool, request.tool_schema_version, request.arguments)
    try:
        return new_pending(request, policy, now, pending_id, supersedes=supersedes)
    except ApprovalError as error:
        raise refused(error) from None


def _asked(approval: PendingApproval | ApprovalRequest) -> str:
    """The digest of what an ``operation_id`` was requested for; the row keeps these columns, not the digest."""
    return request_digest({"fingerprint": approval.fingerprint, "call_id": approval.call_id,
                           "session_id": approval.session_id})


def _repeat(existing: PendingApproval, request: ApprovalRequest) -> ApprovalRecordV1:
    """The stored record for a repeated request, whatever its status; another request is a conflict."""
    if decide(_asked(existing), _asked(request)) is Decision.CONFLICT:
        raise Refused("idempotency_conflict",
                      f"operation {request.operation_id} was requested with another call or fingerprint", 409)
    return record_of(existing)


# What a request's unit of work ends with: the record to answer (and whether it is new), or a refusal to raise
# once it committed (it may have stored a refusal event, an expiry or the edit intent's outcome).
Outcome = tuple[ApprovalRecordV1 | Refused, bool]


async def _new(unit: Work, ports: Ports, request: ApprovalRequest, run_id: str | None) -> Outcome:
    now = await unit.now()
    try:
        pending = admit(request, ports.policy, now, new_pending_id())
    except Refused as refusal:
        await unit.emit(subjects.APPROVAL_EVT_REQUEST_REFUSED, ApprovalRequestRefusedV1(
            session_id=request.session_id, call_id=request.call_id, operation_id=request.operation_id,
            error=ErrorV1(code=refusal.code, message=refusal.message, status=refusal.status,
                          details=refusal.details or None), refused_at=now),
            msg_id=f"approval.request_refused.{request.operation_id}")
        return refusal, False
    if not await unit.approvals.insert_new(pending):  # a concurrent delivery inserted it first
        return _repeat(await unit.approvals.get_by_operation(request.operation_id), request), False
    standing = await standing_for(unit, pending, now)
    run = await run_of(unit, pending, run_id, standing)
    await emit_requested(unit, pending)
    pending = await approve_at_once(unit, ports, pending, standing, run, now)  # a standing approval decides it now
    failpoint("approval.request.before_db_commit")  # approval, event and audit row written, not committed
    return record_of(pending), True


async def _edited(unit: Work, ports: Ports, request: ApprovalRequest, supersedes: str) -> Outcome:
    """The ledger's version of an edit this service recorded: the old version's row locked, the new version
    replaces it if it is still pending; otherwise the intent records why not (the edit answers that)."""
    intent = await unit.edits.get(request.operation_id)
    old = await unit.approvals.get(intent.pending_id, lock=True) if intent is not None else None
    if not is_requested(intent, old, request, supersedes):
        raise InvalidMessage("edit_not_requested", f"operation {request.operation_id} would supersede "
                                                   f"{supersedes}, an edit this service never recorded")
    existing = await unit.approvals.get_by_operation(request.operation_id)  # a twin that held the lock first
    if existing is not None:
        return _repeat(existing, request), False
    if intent.refusal is not None:  # handled before: the refusal stands
        return Refused(intent.refusal["code"], intent.refusal["message"], intent.refusal["status"]), False
    now = await unit.now()
    try:
        still_editable(old, now)
        new = admit(request, ports.policy, now, new_pending_id(), supersedes=old.pending_id)
    except (ApprovalError, Refused) as error:
        return await _refuse_edit(unit, intent, old, now, error), False
    return await _replace(unit, intent, old, edited_version(new, old, intent.editor), now), True


async def _refuse_edit(unit: Work, intent: EditIntent, old: PendingApproval, now: datetime,
                       error: ApprovalError | Refused) -> Refused:
    """The old version ended (or expires now) or the policy refuses the new one: the intent records it."""
    refusal = refused(error) if isinstance(error, ApprovalError) else error
    if refusal.code == "expired":
        await expire_if_due(unit, old, now)
    await unit.edits.refuse(intent.operation_id, {"code": refusal.code, "status": refusal.status,
                                                  "message": refusal.message})
    return refusal


async def _replace(unit: Work, intent: EditIntent, old: PendingApproval, new: PendingApproval,
                   now: datetime) -> ApprovalRecordV1:
    """The new version, the old one ``superseded`` by the editor, their events and audit rows."""
    origin = await unit.approvals.trace_context(old.pending_id)  # the new version continues the call's trace
    await unit.approvals.insert_new(new, trace_context=origin)
    ended = supersede(old, new.pending_id, now, decided_by=intent.editor)
    await unit.approvals.save_outcome(ended)
    await unit.approvals.append_decision(old.pending_id, actor=intent.editor, action="edit",
                                         fingerprint=old.fingerprint, comment=None, at=now)
    await emit_resolved(unit, ended)
    await emit_requested(unit, new)
    failpoint("approval.request.before_db_commit")
    return record_of(new)


async def request_approval(cmd: RequestApprovalV1, ports: Ports) -> ApprovalRecordV1:
    """The ledger asks (from its outbox) for a decision on an operation it prepared: store the pending approval under
    the policy in force (idempotent by operation_id).

    Verify that the ledger sent it and who asked, then store the pending approval (or refuse it: nothing
    stored)."""
    verify_ledger_signature(cmd, ports)
    requester = verify_requester(cmd, ports)
    run_id = requester.run_id if requester.purpose == RUN else None  # a chat run's call: its run, as vouched
    request = request_of(cmd)

    async def work(unit: Work) -> Outcome:
        existing = await unit.approvals.get_by_operation(request.operation_id)
        if existing is not None:
            return _repeat(existing, request), False
        if cmd.supersedes is not None:
            return await _edited(unit, ports, request, cmd.supersedes)
        first = await unit.approvals.first_of_call(request.session_id, request.call_id)
        if first is not None and first.operation_id == request.operation_id:
            # a twin delivery of this request committed between the two reads: a repeat, not a second write
            return _repeat(await unit.approvals.get_by_operation(request.operation_id), request), False
        if first is not None:  # one call, one write (the ledger prepares one; this holds if it did not)
            raise InvalidMessage("call_already_requested", f"call {request.call_id} of this session was already "
                                                           f"requested as operation {first.operation_id}")
        return await _new(unit, ports, request, run_id)

    with step("approval", "request", session_id=cmd.session_id, call_id=cmd.call_id,
              operation_id=cmd.operation_id):  # the approval stores this trace: decide and expiry continue it
        answer, created = await ports.unit.run(work)
    if created:
        failpoint("approval.request.after_db_commit")  # committed; neither published nor acknowledged
        ports.new_deadline()
    if isinstance(answer, Refused):
        raise answer
    return answer
