"""Approval commands, queries and events (schema_version 1)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from erpilot_contracts.base import ErrorV1, Message
from erpilot_contracts.erp.preview import PreviewV1
from erpilot_contracts.json_input import CanonicalArguments

ApprovalStatus = Literal["pending", "approved", "rejected", "cancelled", "expired", "superseded", "withdrawn"]
DecisionAction = Literal["approve", "reject", "cancel"]
# Why the person asking may not decide (first that applies): no required role, separation of duties,
# or the approval's state (decided, expired, superseded, withdrawn).
CannotDecideReason = Literal["role", "separation_of_duties", "already_decided", "expired", "superseded",
                             "withdrawn", "already_voted"]


class GrantV1(Message):
    """A signed, single-use permission to commit one operation with one fingerprint.

    ``signature`` is base64 Ed25519 over the RFC 8785 JSON of every other field.
    """

    pending_id: str
    operation_id: str
    fingerprint: str
    decided_by: str
    decided_at: datetime
    stock_check: Literal["exact", "sufficient"] | None = Field(
        None, description="submit_order only: how the ERP re-checks stock (policy `stock_check`).")
    signature: str = ""


class VoteV1(Message):
    """One person's vote on one version of an approval (quorum, SPEC §9)."""

    sub: str = Field(description="Who voted (a delegate, when `on_behalf_of` is set).")
    role: str = Field(description="The required role the voter decided as (the delegator's, for a delegate).")
    action: DecisionAction
    at: datetime
    comment: str | None = None
    on_behalf_of: str | None = Field(
        None, description="The delegator whose roles the voter decided with (SPEC §10 delegation); None: their own.")


class ApprovalRecordV1(Message):
    """A pending approval and, once decided, its decision (SPEC §3.2)."""

    pending_id: str
    call_id: str
    session_id: str
    tool: str
    tool_schema_version: int = 1
    arguments: dict[str, Any]
    fingerprint: str
    operation_id: str
    risk: str
    preview: PreviewV1
    required_roles: list[str]
    requested_by: str
    created_at: datetime
    expires_at: datetime
    status: ApprovalStatus
    decided_by: str | None = None
    decided_at: datetime | None = None
    comment: str | None = None
    policy_version: str
    superseded_by: str | None = None
    supersedes: str | None = None
    stock_check: Literal["exact", "sufficient"] | None = Field(
        None, description="submit_order only: the policy's stock re-check, carried into the grant.")
    edited_by: str | None = Field(
        None, description="Who made this version by editing the previous one; None for the requester's own.")
    can_decide: bool | None = Field(
        None, description="Whether the person asking may approve it now (roles, separation of duties, state); "
                          "set on query answers for that person, None where no one asked.")
    cannot_decide_reason: CannotDecideReason | None = Field(
        None, description="When can_decide is false: why. `separation_of_duties` still allows reject/cancel.")
    can_decide_for: str | None = Field(
        None, description="When can_decide: the delegator the person would decide for as their delegate; None: in "
                          "their own right.")
    approvals_required: int = Field(1, description="Quorum: distinct people who must approve this fingerprint.")
    approvals_received: int = Field(0, description="Distinct people who approved this version so far.")
    votes: list[VoteV1] = Field(default_factory=list, description="Every vote on this version, oldest first.")
    rejections_to_reject: int = Field(1, description="Distinct people whose rejects end it rejected (1: the first).")
    decided_on_behalf_of: str | None = Field(
        None, description="The delegator `decided_by` decided for (\"decided by Ana for Bob\"); None: in their own "
                          "right.")
    escalate_to: str | None = Field(
        None, description="Policy `escalate_to`: the role this version gains if still undecided at `escalate_at`.")
    escalate_at: datetime | None = Field(
        None, description="When an undecided version escalates (created_at + policy `escalate_after`); None: never.")
    escalated_at: datetime | None = Field(
        None, description="When it escalated (its `escalate_to` joined `required_roles`); None: not escalated.")
    agent_reason: str | None = Field(
        None, description="What the agent says about why it asks (its claim, unchecked; None: it said nothing, or "
                          "a person's edit made this version).")


class RequestApprovalV1(Message):
    """Store a pending approval. Idempotent by ``operation_id``.

    Sent by the ERP only, from its outbox, in the transaction that stored the prepared operation: built from the
    ledger's own record (preview, arguments, fingerprint, requester), never from the agent's words, and signed
    with the ledger's key (``ledger_signature``), which the approval service checks before anything else."""

    call_id: str
    session_id: str
    tool: str
    tool_schema_version: int = 1
    arguments: CanonicalArguments
    fingerprint: str
    operation_id: str
    preview: PreviewV1
    requested_by: str
    assertion: str | None = Field(None, description="The gateway's requester assertion for `requested_by`, as the "
                                                    "agent forwarded it to the ERP (unchanged).")
    asserted_at: datetime | None = Field(None, description="When the ledger accepted the assertion (the prepare of "
                                                           "the call's first version): it must be valid then.")
    prepared_at: datetime | None = Field(None, description="When the ledger prepared this operation.")
    supersedes: str | None = Field(None, description="Edits: the operation this version replaces (the approval "
                                                     "service accepts it only for an edit it recorded itself).")
    agent_reason: str | None = Field(None, max_length=500, description=(
        "The agent's words on why it asks (its tool call's `reason`), passed on as given: shown as \"the agent "
        "says\", apart from the preview; outside the fingerprint and trusted for nothing."))
    ledger_signature: str | None = Field(
        None, description="Base64 Ed25519 signature by the ERP's ledger key (`ERPILOT_LEDGER_SIGNING_KEY`) over the "
                          "RFC 8785 JSON of every other field (unset ones left out, datetimes as UTC ISO-8601). "
                          "A request without one that verifies is an invalid message: nothing is stored.")


class Actor(Message):
    """The authenticated person on whose behalf the gateway asks; roles come from the verified JWT."""

    sub: str
    roles: list[str]


class DecideV1(Message):
    pending_id: str
    action: DecisionAction
    fingerprint: str
    comment: str | None = None
    actor: Actor


class DecisionItemV1(Message):
    """One approval of a bulk decision, with the fingerprint the person was shown."""

    pending_id: str
    fingerprint: str


class DecideManyV1(Message):
    """One action on several approvals, all or nothing: one transaction; every item is checked like a single
    decision (role, separation of duties, state, deadline, fingerprint). The first item that fails is named
    in the refusal (``details.pending_id``, ``details.index``) with its own code, and nothing is decided."""

    action: DecisionAction
    items: list[DecisionItemV1] = Field(min_length=1, max_length=100)
    comment: str | None = None
    actor: Actor


class EditApprovalV1(Message):
    pending_id: str
    fingerprint: str
    arguments: CanonicalArguments
    actor: Actor


class GetApprovalV1(Message):
    pending_id: str
    actor: Actor


class ListApprovalsV1(Message):
    actor: Actor
    status: ApprovalStatus | None = None
    session_id: str | None = None
    tool: str | None = None
    requested_by: str | None = None
    since: datetime | None = Field(None, description="Only approvals created at or after this instant.")
    cursor: str | None = Field(None, description="The `next_cursor` of the previous page.")
    limit: int = Field(100, ge=1, le=500)


class FindReferringApprovalV1(Message):
    """Is there an approval, pending or decided, whose arguments name one of these drafts or orders, that ``actor``
    may decide? The gateway asks before it shows a draft or an order to someone who is neither the owner of the
    session it came from nor an admin (SPEC §10: approvers and managers read what an approval they may decide
    refers to)."""

    actor: Actor
    draft_ids: list[str] = Field(default_factory=list, max_length=10)
    order_ids: list[str] = Field(default_factory=list, max_length=10)


class ReferringApprovalV1(Message):
    """The answer to a ``FindReferringApprovalV1``: one such approval, or none."""

    pending_id: str | None = Field(None, description="An approval the actor may decide naming one of the objects; "
                                                     "None: there is none.")


class ApprovalPageV1(Message):
    """The answer to a ``ListApprovalsV1``: one page of records, newest first, as the person asking sees them."""

    items: list[ApprovalRecordV1]
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page; None: no more.")


class DecisionsV1(Message):
    """The answer to a ``DecideManyV1``: every item's record after the action, in the order given."""

    action: DecisionAction
    items: list[ApprovalRecordV1]


class AuditQueryV1(Message):
    """Admins: audit log rows about one approval or operation, or since a time, oldest first."""

    actor: Actor
    pending_id: str | None = None
    operation_id: str | None = None
    since: datetime | None = None
    limit: int = Field(1000, ge=1, le=5000)


class AuditRowV1(Message):
    """One row of the audit log as ``query.approval.audit`` answers it (``erpilot audit export``'s line)."""

    seq: int
    at: datetime
    kind: str
    pending_id: str | None = None
    operation_id: str | None = None
    actor: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    prev_hash: str
    hash: str
    signature: str


class AuditPageV1(Message):
    """The answer to an ``AuditQueryV1``: its rows, oldest first."""

    items: list[AuditRowV1]


class AuditChainQueryV1(Message):
    """Operations (``erpilot audit``): the whole audit chain a page at a time, in ``seq`` order: the rows after
    ``after_seq`` (and at or after ``since``), with every signed checkpoint. Only the NATS admin user may ask
    (``erpilot.stack.nats_security``): it names no person, and a verifier needs every row."""

    after_seq: int = Field(0, ge=0)
    since: datetime | None = None
    limit: int = Field(200, ge=1, le=1000, description="Rows per page (a page must fit in one NATS message).")
    with_checkpoints: bool = Field(False, description="Also every signed checkpoint (a verifier asks once).")


class AuditCheckpointV1(Message):
    """A signed head of the chain: ``(seq, hash)`` signed with the approval service's key."""

    seq: int
    hash: str
    signed_at: datetime
    signature: str


class AuditChainPageV1(Message):
    """The answer to an ``AuditChainQueryV1``: its rows, oldest first, the checkpoints, and where the next page
    starts (``next_after_seq``; None: this page holds the chain's end)."""

    items: list[AuditRowV1]
    checkpoints: list[AuditCheckpointV1] = Field(default_factory=list)
    next_after_seq: int | None = None


class PolicyQueryV1(Message):
    """Ask the policy in force about tools: all of them, or one."""

    tool: str | None = None


class ToolPolicyV1(Message):
    tool: str
    action: Literal["allow", "require_approval", "deny"]
    roles: list[str]
    ttl_seconds: int
    stock_check: Literal["exact", "sufficient"] | None = Field(
        None, description="submit_order only: how prepare and commit re-check stock.")
    approvals_required: int = Field(1, description="The tool's quorum (an amount rule may require more).")
    rejections_to_reject: int = Field(1, description="Rejects that end an approval (an amount rule may differ).")


class PolicyViewV1(Message):
    version: str
    tools: list[ToolPolicyV1]


class ApprovalRequestedV1(Message):
    record: ApprovalRecordV1


class ApprovalExpiringV1(Message):
    """A pending approval reaches its warning time (``warn_before`` its deadline) still undecided; sent
    once per approval, never after it ended."""

    pending_id: str
    call_id: str
    session_id: str
    operation_id: str
    tool: str
    expires_at: datetime
    warned_at: datetime


class ApprovalEscalatedV1(Message):
    """A pending approval reached its policy's ``escalate_after`` undecided: ``escalated_to`` may now decide it too.
    Sent once per approval version, never after it ended; its deadline is unchanged."""

    pending_id: str
    call_id: str
    session_id: str
    operation_id: str
    tool: str
    escalated_to: str = Field(description="The role that joined those who may decide it.")
    required_roles: list[str] = Field(description="Who may decide it now (escalated_to included).")
    escalated_at: datetime
    expires_at: datetime = Field(description="Its deadline, as it was: escalation never changes it.")


class ApprovalResolvedV1(Message):
    """A pending approval left ``pending``. ``grant`` is present only when approved."""

    pending_id: str
    call_id: str
    session_id: str
    operation_id: str
    status: ApprovalStatus
    decided_by: str | None = None
    decided_at: datetime | None = None
    comment: str | None = None
    grant: GrantV1 | None = None
    superseded_by: str | None = None
    decided_on_behalf_of: str | None = Field(None, description="The delegator `decided_by` decided for, if any.")
    approvals_required: int = Field(1, description="Quorum approvals only (else 1): distinct approves needed.")
    votes: list[VoteV1] = Field(default_factory=list, description=(
        "Quorum approvals only: every vote, oldest first, so a consumer that sees this before the deciding "
        "vote's evt.approval.voted can still show every vote before the resolution."))


class ApprovalRequestRefusedV1(Message):
    """A request the approval service refused (e.g. the policy in force now denies the tool): nothing is pending,
    and the call it belongs to will not be executed. A request whose assertion does not verify is dead-lettered
    instead (nothing legitimate sent it)."""

    session_id: str
    call_id: str
    operation_id: str
    error: ErrorV1
    refused_at: datetime


class ApprovalVotedV1(Message):
    """A person voted on a quorum approval (``approvals_required`` > 1); emitted with the vote, before the
    ``evt.approval.resolved`` the deciding vote also causes."""

    pending_id: str
    call_id: str
    session_id: str
    operation_id: str
    vote: VoteV1
    approvals_required: int
    approvals_received: int
    status: ApprovalStatus = Field(description="The approval's status after this vote.")


# --- delegation (SPEC §10) ---------------------------------------------------------------------------


class GiveDelegationV1(Message):
    """An approver or manager (``actor``) lets ``to`` decide with their roles until ``until``: for ``tools`` (None:
    every write tool). ``delegation_id`` is chosen by the gateway, so a redelivered command stores one delegation."""

    delegation_id: str
    to: str
    until: datetime
    tools: list[str] | None = None
    actor: Actor


class RevokeDelegationV1(Message):
    """The delegator ends a delegation now (someone else's: 404, like an unknown one)."""

    delegation_id: str
    actor: Actor


class ListDelegationsV1(Message):
    """The actor's delegations still in force, given and received."""

    actor: Actor


class DelegationV1(Message):
    """One delegation: ``to`` decides with ``from``'s ``roles`` for ``tools`` (None: every write tool) until
    ``until``, unless revoked earlier."""

    model_config = ConfigDict(extra="ignore", frozen=True, serialize_by_alias=True, validate_by_name=True,
                              validate_by_alias=True)

    delegation_id: str
    from_: str = Field(alias="from", description="The delegator (who gave it).")
    to: str = Field(description="The delegate.")
    until: datetime
    tools: list[str] | None = Field(None, description="The tools it covers; None: every write tool.")
    roles: list[str] = Field(description="The delegator's deciding roles when they gave it: what the delegate "
                                         "decides with.")
    created_at: datetime
    revoked_at: datetime | None = None


class DelegationPageV1(Message):
    """The answer to a ``ListDelegationsV1``: given and received, newest first."""

    items: list[DelegationV1]
