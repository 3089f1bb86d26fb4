"""Every NATS subject and JetStream stream Erpilot uses, in one place.

Naming: ``erpilot.v1.cmd.<service>.<verb>`` are commands (imperative, durable, one consumer group per
service), ``erpilot.v1.req.<service>.<verb>`` are commands as core NATS requests (a queue group per service):
the receiver stores each before it answers and the sender retries a request left unanswered with the same key
(SPEC §11; no stream stores them), ``erpilot.v1.evt.<service>.<past_tense>`` are events from a transactional outbox,
``erpilot.v1.query.<service>.<noun>`` are side-effect-free request/reply over core NATS, and
``erpilot.v1.sessions.<session_id>.events`` is the per-session UI stream of SPEC §4 (core NATS, live only: the
agent's database stores the events, ``query.agent.events`` replays them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "erpilot.v1"


@dataclass(frozen=True)
class StreamSpec:
    name: str
    subjects: tuple[str, ...]
    max_age_seconds: int
    description: str


COMMANDS_STREAM = StreamSpec(
    "ERPILOT_COMMANDS", (f"{PREFIX}.cmd.>",), 7 * 24 * 3600,
    "Commands to services; each service consumes its own subjects with one durable consumer.",
)
EVENTS_STREAM = StreamSpec(
    "ERPILOT_EVENTS", (f"{PREFIX}.evt.>",), 30 * 24 * 3600,
    "Domain events published from transactional outboxes.",
)
DEAD_LETTER_STREAM = StreamSpec(
    "ERPILOT_DEAD_LETTERS", (f"{PREFIX}.dlq.>",), 30 * 24 * 3600,
    "Messages a consumer could not process: malformed, or failed too many times.",
)
ALL_STREAMS = (COMMANDS_STREAM, EVENTS_STREAM, DEAD_LETTER_STREAM)
# Streams an earlier version declared, deleted by `erpilot migrate`. ERPILOT_SESSIONS held the session events:
# they are stored once, in the agent's database, and published live on core NATS (SPEC §11); a stream left on
# their subjects would go on storing every core publish.
RETIRED_STREAMS = ("ERPILOT_SESSIONS",)
# Durable consumers an earlier version declared, (stream, durable name), deleted by `erpilot migrate`: the tool
# call, the decision and the draft became core requests (``req.agent.tool_call``, ``req.approval.decide``,
# ``req.erp.draft``, issue 31), so nothing is published on their old subjects.
RETIRED_CONSUMERS = (("ERPILOT_COMMANDS", "agent__erpilot_v1_cmd_agent_tool_call"),
                     ("ERPILOT_COMMANDS", "approval__erpilot_v1_cmd_approval_decide"),
                     ("ERPILOT_COMMANDS", "erp__erpilot_v1_cmd_erp_draft"))

# --- ERP ---------------------------------------------------------------------------------------
# ExecuteToolV1 for draft tools -> ReplyV1(ToolResultV1): stored under its operation_id before the answer, sent
# again by the agent (its retry, its run's next drive, its pass over left calls) with the same operation_id
ERP_REQ_DRAFT = f"{PREFIX}.req.erp.draft"
ERP_CMD_PREPARE = f"{PREFIX}.cmd.erp.prepare"        # PrepareOperationV1 -> PreparedOperationV1 (+ its outbox:
#                                                      cmd.approval.request, built from the ledger's record)
ERP_CMD_COMMIT = f"{PREFIX}.cmd.erp.commit"          # CommitOperationV1 (approval's outbox) -> OperationStatusV1
ERP_CMD_UPDATE_PRODUCT = f"{PREFIX}.cmd.erp.update_product"  # UpdateProductV1 -> ReplyV1(ProductV1)
ERP_QUERY_READ = f"{PREFIX}.query.erp.read"          # ExecuteToolV1 for read tools -> ReplyV1(ToolResultV1)
ERP_QUERY_OPERATION = f"{PREFIX}.query.erp.operation"  # GetOperationV1 -> ReplyV1(OperationStatusV1)
ERP_QUERY_VIEW = f"{PREFIX}.query.erp.view"          # ErpViewV1 -> ReplyV1(ErpViewResultV1)
ERP_EVT_OPERATION_FINISHED = f"{PREFIX}.evt.erp.operation_finished"  # OperationStatusV1

# --- Approval ----------------------------------------------------------------------------------
APPROVAL_CMD_REQUEST = f"{PREFIX}.cmd.approval.request"  # RequestApprovalV1 -> ReplyV1(ApprovalRecordV1)
APPROVAL_REQ_DECIDE = f"{PREFIX}.req.approval.decide"    # DecideV1 -> ReplyV1(ApprovalRecordV1)
APPROVAL_CMD_EDIT = f"{PREFIX}.cmd.approval.edit"        # EditApprovalV1 -> ReplyV1(ApprovalRecordV1)
APPROVAL_CMD_DECIDE_MANY = f"{PREFIX}.cmd.approval.decide_many"  # DecideManyV1 -> ReplyV1(DecisionsV1), all or none
APPROVAL_CMD_DELEGATE = f"{PREFIX}.cmd.approval.delegate"  # GiveDelegationV1 -> ReplyV1(DelegationV1)
# RevokeDelegationV1 -> ReplyV1(DelegationV1)
APPROVAL_CMD_REVOKE_DELEGATION = f"{PREFIX}.cmd.approval.revoke_delegation"
APPROVAL_CMD_STAND = f"{PREFIX}.cmd.approval.stand"  # GiveStandingApprovalV1 -> ReplyV1(StandingApprovalV1)
# RevokeStandingApprovalV1 -> ReplyV1(StandingApprovalV1)
APPROVAL_CMD_REVOKE_STANDING = f"{PREFIX}.cmd.approval.revoke_standing"
# EndRunV1 -> ReplyV1(StandingRunV1): the owner cancelled a run; standing approvals approve none of its calls again
APPROVAL_CMD_END_RUN = f"{PREFIX}.cmd.approval.end_run"
# DecideByLinkV1 -> ReplyV1(ApprovalRecordV1): an approval email's link, confirmed (SPEC §11)
APPROVAL_CMD_DECIDE_BY_LINK = f"{PREFIX}.cmd.approval.decide_by_link"
# ChatActionV1 -> ReplyV1(ApprovalRecordV1): a chat card's button, as the platform signed it (SPEC §11)
APPROVAL_CMD_CHAT_ACTION = f"{PREFIX}.cmd.approval.chat_action"
APPROVAL_QUERY_POLICY = f"{PREFIX}.query.approval.policy"      # PolicyQueryV1 -> ReplyV1(PolicyViewV1)
APPROVAL_QUERY_GET = f"{PREFIX}.query.approval.get"            # GetApprovalV1 -> ReplyV1(ApprovalRecordV1)
APPROVAL_QUERY_LIST = f"{PREFIX}.query.approval.list"          # ListApprovalsV1 -> ReplyV1(ApprovalPageV1)
APPROVAL_QUERY_AUDIT = f"{PREFIX}.query.approval.audit"        # AuditQueryV1 -> ReplyV1(AuditPageV1), admins
APPROVAL_QUERY_AUDIT_CHAIN = f"{PREFIX}.query.approval.audit_chain"  # AuditChainQueryV1 -> AuditChainPageV1 (ops)
# FindReferringApprovalV1 -> ReplyV1(ReferringApprovalV1): may this person read that draft or order (SPEC §10)
APPROVAL_QUERY_REFERRING = f"{PREFIX}.query.approval.referring"
APPROVAL_QUERY_DELEGATIONS = f"{PREFIX}.query.approval.delegations"  # ListDelegationsV1 -> ReplyV1(DelegationPageV1)
# ListStandingApprovalsV1 -> ReplyV1(StandingApprovalPageV1)
APPROVAL_QUERY_STANDING = f"{PREFIX}.query.approval.standing"
# EmailLinkV1 -> ReplyV1(EmailLinkViewV1): what an approval email's link stands for, deciding nothing
APPROVAL_QUERY_EMAIL_LINK = f"{PREFIX}.query.approval.email_link"
APPROVAL_EVT_REQUESTED = f"{PREFIX}.evt.approval.requested"    # ApprovalRequestedV1
APPROVAL_EVT_RESOLVED = f"{PREFIX}.evt.approval.resolved"      # ApprovalResolvedV1
APPROVAL_EVT_EXPIRING = f"{PREFIX}.evt.approval.expiring"      # ApprovalExpiringV1
APPROVAL_EVT_VOTED = f"{PREFIX}.evt.approval.voted"            # ApprovalVotedV1 (quorum approvals)
APPROVAL_EVT_ESCALATED = f"{PREFIX}.evt.approval.escalated"    # ApprovalEscalatedV1 (policy escalate_after)
APPROVAL_EVT_REQUEST_REFUSED = f"{PREFIX}.evt.approval.request_refused"  # ApprovalRequestRefusedV1

# --- Agent -------------------------------------------------------------------------------------
AGENT_CMD_CREATE_SESSION = f"{PREFIX}.cmd.agent.create_session"  # CreateSessionV1 -> ReplyV1(SessionRefV1)
AGENT_REQ_TOOL_CALL = f"{PREFIX}.req.agent.tool_call"            # StartToolCallV1 -> ReplyV1(ToolCallViewV1)
AGENT_CMD_POST_MESSAGE = f"{PREFIX}.cmd.agent.post_message"      # PostMessageV1 -> ReplyV1(RunRefV1)
AGENT_CMD_CANCEL_RUN = f"{PREFIX}.cmd.agent.cancel_run"          # CancelRunV1 -> ReplyV1(CancelledRunV1)
AGENT_EVT_RUN_CANCELLED = f"{PREFIX}.evt.agent.run_cancelled"      # RunCancelledV1 (outbox) -> approval withdraws
AGENT_QUERY_SESSIONS = f"{PREFIX}.query.agent.sessions"          # ListSessionsV1 -> ReplyV1(SessionPageV1)
AGENT_QUERY_SESSION = f"{PREFIX}.query.agent.session"            # GetSessionV1 -> ReplyV1(SessionViewV1)
AGENT_QUERY_TOOL_CALL = f"{PREFIX}.query.agent.tool_call"        # GetToolCallV1 -> ReplyV1(ToolCallViewV1)
AGENT_QUERY_EVENTS = f"{PREFIX}.query.agent.events"              # GetSessionEventsV1 -> ReplyV1(SessionEventPageV1)

# --- Health ------------------------------------------------------------------------------------
def ping_subject(service: str) -> str:
    """Core NATS subject every replica of ``service`` answers for readiness checks."""
    return f"{PREFIX}.query.{service}.ping"


_SUBJECT_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,100}")


def is_subject_token(value: str) -> bool:
    """Whether ``value`` can stand as one token of a subject: no dot, wildcard, space or control character (a
    session id like ``*`` would otherwise name every session's subject)."""
    return _SUBJECT_TOKEN.fullmatch(value) is not None


SESSION_EVENTS_ALL = f"{PREFIX}.sessions.*.events"  # every session's live events (permissions, documentation)


def session_events_subject(session_id: str) -> str:
    if not is_subject_token(session_id):
        raise ValueError(f"{session_id!r} is not a session id")
    return f"{PREFIX}.sessions.{session_id}.events"


def dead_letter_subject(service: str, original_subject: str) -> str:
    return f"{PREFIX}.dlq.{service}.{original_subject.removeprefix(PREFIX + '.')}"


def command_filter(service: str) -> str:
    return f"{PREFIX}.cmd.{service}.>"
