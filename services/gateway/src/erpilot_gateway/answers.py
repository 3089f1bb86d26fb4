"""HTTP answers the gateway composes itself (the others are the contracts' reply models, returned as they are):
each route declares its answer's model, so ``/openapi.json`` shows a response schema for every route
(services/gateway/tests/unit/test_openapi_responses.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from erpilot_contracts.agent.v1 import ToolCallStatus, ToolOutcome
from erpilot_contracts.approval.v1 import ApprovalStatus
from erpilot_contracts.base import ErrorV1
from erpilot_contracts.erp.preview import PreviewV1


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Liveness(Answer):
    status: Literal["ok"] = "ok"


class Readiness(Answer):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]


class SessionCreated(Answer):
    session_id: str


class RunStarted(Answer):
    run_id: str


class ApprovalOutcome(Answer):
    pending_id: str
    status: ApprovalStatus


class RunCancelled(Answer):
    run_id: str
    status: Literal["cancelled"] = "cancelled"
    approvals: list[ApprovalOutcome]


class CallError(Answer):
    code: str
    message: str


class ToolCallFinished(Answer):
    """200: the call finished (a read, a draft, or a write after its decision and commit)."""

    call_id: str
    status: Literal["finished"] = "finished"
    outcome: ToolOutcome | None
    result: dict[str, Any] | None
    error: CallError | None = None


class ToolCallAccepted(Answer):
    """202: a write awaits its approval (with what the approver is shown), or the call is still on its way."""

    call_id: str
    status: ToolCallStatus
    pending_id: str | None = None
    fingerprint: str | None = None
    expires_at: datetime | None = None
    approval_url: str | None = None
    preview: PreviewV1 | None = None


class OperationView(Answer):
    operation_id: str
    tool: str
    status: Literal["prepared", "committed", "rejected"]
    result: dict[str, Any] | None = None
    error: ErrorV1 | None = None
    committed_at: datetime | None = None


class ChatActionAnswer(Answer):
    text: str
    pending_id: str
    status: ApprovalStatus


class ToolPolicyShown(Answer):
    action: Literal["allow", "require_approval", "deny"]
    roles: list[str]
    ttl: str


class ToolShown(Answer):
    name: str
    kind: str
    schema_version: int
    description: str
    input_schema: dict[str, Any]
    policy: ToolPolicyShown


class ToolCatalogue(Answer):
    items: list[ToolShown]
    policy_version: str
