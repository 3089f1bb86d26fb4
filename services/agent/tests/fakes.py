"""A recording fake of the ERP and the approval service's policy as the agent sees them (``CallDownstream``), and
the approval records the approval service's events would carry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from erpilot_contracts.approval.v1 import ApprovalRecordV1, PolicyViewV1, ToolPolicyV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import (
    ExecuteToolV1,
    PreparedOperationV1,
    PrepareOperationV1,
    PreviewV1,
    ToolResultV1,
)
from erpilot_contracts.tools.v1 import ToolKind, get_tool
from erpilot_platform.broker import ReplyError
from erpilot_platform.testing.previews import preview

from .memory_agent import START


def reply_error(code: str, message: str, status: int, **details: Any) -> ReplyError:
    return ReplyError("test.subject", ReplyV1.failure(code, message, status, **details))


class FakeDownstream:
    """The ERP and the approval service's policy: writes need approval, everything else is allowed, unless
    ``actions`` says otherwise. An answer set to a ``ReplyError`` (or any exception) is raised; every command
    is recorded."""

    def __init__(self) -> None:
        self.actions: dict[str, str] = {}
        self.stock_check: str | None = None
        self.run_answer: ToolResultV1 | Exception = ToolResultV1(outcome="succeeded", result={"ok": True})
        self.prepare_answer: Exception | None = None  # None: prepared
        self.policy_versions_seen: list[str] = []
        self.runs: list[ExecuteToolV1] = []
        self.prepares: list[PrepareOperationV1] = []

    def _policy(self, tool: str) -> ToolPolicyV1:
        default = "require_approval" if get_tool(tool).kind is ToolKind.WRITE else "allow"
        return ToolPolicyV1(tool=tool, action=self.actions.get(tool, default), roles=["manager"], ttl_seconds=900,
                            stock_check=self.stock_check)

    async def policy(self, tool: str) -> ToolPolicyV1:
        return self._policy(tool)

    async def policy_view(self) -> PolicyViewV1:
        return PolicyViewV1(version="test", tools=[self._policy(tool) for tool in self.actions])

    def policy_version_seen(self, version: str) -> None:
        self.policy_versions_seen.append(version)

    async def _run(self, cmd: ExecuteToolV1) -> ToolResultV1:
        self.runs.append(cmd)
        if isinstance(self.run_answer, Exception):
            raise self.run_answer
        return self.run_answer

    read = draft = _run

    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        self.prepares.append(cmd)
        if self.prepare_answer is not None:
            raise self.prepare_answer
        return PreparedOperationV1(operation_id=cmd.operation_id, tool=cmd.tool, fingerprint=cmd.fingerprint,
                                   preview=PreviewV1(operation=cmd.tool, object="it", target="them"))


def approval_record(prepared: PrepareOperationV1, pending_id: str, **extra: Any) -> ApprovalRecordV1:
    """The approval service's record of the approval the ERP requested for ``prepared`` (``extra``: e.g. an
    edit's ``supersedes`` and ``edited_by``)."""
    fields = dict(
        pending_id=pending_id, call_id=prepared.call_id, session_id=prepared.session_id, tool=prepared.tool,
        arguments=prepared.arguments, fingerprint=prepared.fingerprint, operation_id=prepared.operation_id,
        risk="low", preview=preview(prepared.tool, "it", "them"), required_roles=["manager"],
        requested_by=prepared.requested_by, created_at=START, expires_at=START + timedelta(minutes=15),
        status="pending", policy_version="test")
    return ApprovalRecordV1(**{**fields, **extra})
