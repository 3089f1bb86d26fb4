"""Every request/reply subject declared once: what is sent, what comes back, and how it travels.

An ``Endpoint`` names a subject of ``erpilot_contracts.subjects`` with its request model, the model of
its ok reply's ``data`` and how it travels: a durable command (through the JetStream command stream,
``cmd.*``), a retried command (``req.*``: a core NATS request the receiver stores before it answers, which
the sender sends again with the same key while no answer comes, SPEC §11) or a core NATS query (``query.*``).
Callers send with ``erpilot_platform.broker.call(broker, endpoint, request)``, so no call site names a reply
model or a durability of its own.

Every reply is a model of its own (``typed_reply``): an endpoint whose answer would be a bare JSON object is
refused when it is declared, so every caller reads its replies typed.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, RootModel

from erpilot_contracts import subjects
from erpilot_contracts.agent.v1 import (
    CancelledRunV1,
    CancelRunV1,
    CreateSessionV1,
    GetSessionV1,
    GetToolCallV1,
    ListSessionsV1,
    PostMessageV1,
    RunRefV1,
    SessionPageV1,
    SessionRefV1,
    SessionViewV1,
    StartToolCallV1,
    ToolCallViewV1,
)
from erpilot_contracts.approval.chat import ChatActionV1
from erpilot_contracts.approval.links import DecideByLinkV1, EmailLinkV1, EmailLinkViewV1
from erpilot_contracts.approval.standing import (
    EndRunV1,
    GiveStandingApprovalV1,
    ListStandingApprovalsV1,
    RevokeStandingApprovalV1,
    StandingApprovalPageV1,
    StandingApprovalV1,
    StandingRunV1,
)
from erpilot_contracts.approval.v1 import (
    ApprovalPageV1,
    ApprovalRecordV1,
    AuditChainPageV1,
    AuditChainQueryV1,
    AuditPageV1,
    AuditQueryV1,
    DecideManyV1,
    DecideV1,
    DecisionsV1,
    DelegationPageV1,
    DelegationV1,
    EditApprovalV1,
    FindReferringApprovalV1,
    GetApprovalV1,
    GiveDelegationV1,
    ListApprovalsV1,
    ListDelegationsV1,
    PolicyQueryV1,
    PolicyViewV1,
    ReferringApprovalV1,
    RequestApprovalV1,
    RevokeDelegationV1,
)
from erpilot_contracts.base import Message
from erpilot_contracts.erp.v1 import (
    CommitOperationV1,
    ErpViewResultV1,
    ErpViewV1,
    ExecuteToolV1,
    GetOperationV1,
    OperationStatusV1,
    PreparedOperationV1,
    PrepareOperationV1,
    ProductV1,
    ToolResultV1,
    UpdateProductV1,
)
from erpilot_contracts.sessions.v1 import GetSessionEventsV1, SessionEventPageV1

Req = TypeVar("Req", bound=Message)
Rep = TypeVar("Rep", bound=BaseModel)


def typed_reply(model: Any) -> bool:
    """Whether ``model`` says what a reply holds: a pydantic model with fields of its own (beyond
    ``schema_version``, extra fields not welcome), or a root that is such a model or a union of them; not a bare
    JSON object (a root over ``dict[str, Any]``) that callers would have to pick apart by key."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return False
    if issubclass(model, RootModel):
        root = model.model_fields["root"].annotation
        union = typing.get_origin(root) in (typing.Union, types.UnionType)
        return all(typed_reply(option) for option in (typing.get_args(root) if union else (root,)))
    return bool(set(model.model_fields) - {"schema_version"}) and model.model_config.get("extra") != "allow"


@dataclass(frozen=True)
class Endpoint(Generic[Req, Rep]):
    subject: str
    request: type[Req]
    reply: type[Rep]
    durable: bool  # True: a command through the JetStream command stream; False: a core NATS request
    retried: bool = False  # a core request that changes state: stored by its receiver, retried by its sender

    def __post_init__(self) -> None:
        kind, name = ((".cmd.", "command") if self.durable else (".req.", "retried command") if self.retried
                      else (".query.", "query"))
        if kind not in self.subject or (self.durable and self.retried):
            # the subject's naming says how it travels: the two must agree
            raise ValueError(f"{self.subject} is not a {name} subject")
        if not typed_reply(self.reply):
            raise TypeError(f"{self.subject}: the reply {self.reply!r} is not a model of its own")


def command(subject: str, request: type[Req], reply: type[Rep]) -> Endpoint[Req, Rep]:
    return Endpoint(subject, request, reply, durable=True)


def retried(subject: str, request: type[Req], reply: type[Rep]) -> Endpoint[Req, Rep]:
    """A command sent as a core request: its receiver stores it (keyed by the request's own id) before it
    answers, and its sender retries it with the same key until an answer comes (``broker.send``)."""
    return Endpoint(subject, request, reply, durable=False, retried=True)


def query(subject: str, request: type[Req], reply: type[Rep]) -> Endpoint[Req, Rep]:
    return Endpoint(subject, request, reply, durable=False)


# --- ERP ---------------------------------------------------------------------------------------
ERP_DRAFT = retried(subjects.ERP_REQ_DRAFT, ExecuteToolV1, ToolResultV1)
ERP_PREPARE = command(subjects.ERP_CMD_PREPARE, PrepareOperationV1, PreparedOperationV1)
ERP_COMMIT = command(subjects.ERP_CMD_COMMIT, CommitOperationV1, OperationStatusV1)
ERP_UPDATE_PRODUCT = command(subjects.ERP_CMD_UPDATE_PRODUCT, UpdateProductV1, ProductV1)
ERP_READ = query(subjects.ERP_QUERY_READ, ExecuteToolV1, ToolResultV1)
ERP_OPERATION = query(subjects.ERP_QUERY_OPERATION, GetOperationV1, OperationStatusV1)
ERP_VIEW = query(subjects.ERP_QUERY_VIEW, ErpViewV1, ErpViewResultV1)

# --- Approval ----------------------------------------------------------------------------------
APPROVAL_REQUEST = command(subjects.APPROVAL_CMD_REQUEST, RequestApprovalV1, ApprovalRecordV1)
APPROVAL_DECIDE = retried(subjects.APPROVAL_REQ_DECIDE, DecideV1, ApprovalRecordV1)
APPROVAL_EDIT = command(subjects.APPROVAL_CMD_EDIT, EditApprovalV1, ApprovalRecordV1)
APPROVAL_DECIDE_MANY = command(subjects.APPROVAL_CMD_DECIDE_MANY, DecideManyV1, DecisionsV1)
APPROVAL_POLICY = query(subjects.APPROVAL_QUERY_POLICY, PolicyQueryV1, PolicyViewV1)
APPROVAL_GET = query(subjects.APPROVAL_QUERY_GET, GetApprovalV1, ApprovalRecordV1)
APPROVAL_LIST = query(subjects.APPROVAL_QUERY_LIST, ListApprovalsV1, ApprovalPageV1)
APPROVAL_AUDIT = query(subjects.APPROVAL_QUERY_AUDIT, AuditQueryV1, AuditPageV1)
APPROVAL_AUDIT_CHAIN = query(subjects.APPROVAL_QUERY_AUDIT_CHAIN, AuditChainQueryV1, AuditChainPageV1)
APPROVAL_REFERRING = query(subjects.APPROVAL_QUERY_REFERRING, FindReferringApprovalV1, ReferringApprovalV1)
APPROVAL_DELEGATE = command(subjects.APPROVAL_CMD_DELEGATE, GiveDelegationV1, DelegationV1)
APPROVAL_REVOKE_DELEGATION = command(subjects.APPROVAL_CMD_REVOKE_DELEGATION, RevokeDelegationV1, DelegationV1)
APPROVAL_DELEGATIONS = query(subjects.APPROVAL_QUERY_DELEGATIONS, ListDelegationsV1, DelegationPageV1)
APPROVAL_STAND = command(subjects.APPROVAL_CMD_STAND, GiveStandingApprovalV1, StandingApprovalV1)
APPROVAL_REVOKE_STANDING = command(subjects.APPROVAL_CMD_REVOKE_STANDING, RevokeStandingApprovalV1,
                                   StandingApprovalV1)
APPROVAL_END_RUN = command(subjects.APPROVAL_CMD_END_RUN, EndRunV1, StandingRunV1)
APPROVAL_DECIDE_BY_LINK = command(subjects.APPROVAL_CMD_DECIDE_BY_LINK, DecideByLinkV1, ApprovalRecordV1)
APPROVAL_CHAT_ACTION = command(subjects.APPROVAL_CMD_CHAT_ACTION, ChatActionV1, ApprovalRecordV1)
APPROVAL_EMAIL_LINK = query(subjects.APPROVAL_QUERY_EMAIL_LINK, EmailLinkV1, EmailLinkViewV1)
APPROVAL_STANDING = query(subjects.APPROVAL_QUERY_STANDING, ListStandingApprovalsV1, StandingApprovalPageV1)

# --- Agent -------------------------------------------------------------------------------------
AGENT_CREATE_SESSION = command(subjects.AGENT_CMD_CREATE_SESSION, CreateSessionV1, SessionRefV1)
AGENT_TOOL_CALL = retried(subjects.AGENT_REQ_TOOL_CALL, StartToolCallV1, ToolCallViewV1)
AGENT_POST_MESSAGE = command(subjects.AGENT_CMD_POST_MESSAGE, PostMessageV1, RunRefV1)
AGENT_CANCEL_RUN = command(subjects.AGENT_CMD_CANCEL_RUN, CancelRunV1, CancelledRunV1)
AGENT_SESSIONS = query(subjects.AGENT_QUERY_SESSIONS, ListSessionsV1, SessionPageV1)
AGENT_SESSION = query(subjects.AGENT_QUERY_SESSION, GetSessionV1, SessionViewV1)
AGENT_TOOL_CALL_VIEW = query(subjects.AGENT_QUERY_TOOL_CALL, GetToolCallV1, ToolCallViewV1)
AGENT_EVENTS = query(subjects.AGENT_QUERY_EVENTS, GetSessionEventsV1, SessionEventPageV1)

ALL: tuple[Endpoint[Any, Any], ...] = tuple(value for value in dict(globals()).values() if isinstance(value, Endpoint))
