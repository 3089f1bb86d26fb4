"""The tool-call pipeline on its in-memory unit of work (``adapters.memory_calls``) and a fake of the
downstream services: no broker, no database.

``FakeDownstream`` answers like the ERP and the approval service and records every command it got.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from erpilot_agent.adapters.memory_calls import MemoryCallStore
from erpilot_agent.service_layer.tool_calls import ToolCallService
from erpilot_contracts.approval.v1 import (
    ApprovalRecordV1,
    GrantV1,
    PolicyViewV1,
    RequestApprovalV1,
    ToolPolicyV1,
)
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1, OperationStatusV1, PrepareOperationV1, ToolResultV1
from erpilot_contracts.tools.v1 import ToolKind, get_tool
from erpilot_platform.broker import ReplyError, ServiceUnavailable

SESSION, OWNER = "ses_1", "alice"
CREATED = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class FakeDownstream:
    """Writes need approval, everything else is allowed, unless ``actions`` says otherwise. An answer set
    to a ``ReplyError`` is raised; the ERP's operations are kept by ``operation_id``."""

    def __init__(self) -> None:
        self.actions: dict[str, str] = {}
        self.stock_check: str | None = None
        self.run_answer: ToolResultV1 | ReplyError = ToolResultV1(outcome="succeeded", result={"ok": True})
        self.prepare_reply: ReplyV1 | None = None  # None: prepared, with a preview
        self.commit_answer: str | Exception = "committed"  # or "rejected"
        self.lose_answer = False
        self.operations: dict[str, OperationStatusV1] = {}
        self.runs: list[ExecuteToolV1] = []
        self.prepares: list[PrepareOperationV1] = []
        self.requests: list[RequestApprovalV1] = []
        self.commits: list[tuple[str, GrantV1]] = []

    def _policy(self, tool: str) -> ToolPolicyV1:
        default = "require_approval" if get_tool(tool).kind is ToolKind.WRITE else "allow"
        return ToolPolicyV1(tool=tool, action=self.actions.get(tool, default), roles=["manager"], ttl_seconds=900,
                            stock_check=self.stock_check)

    async def policy(self, tool: str) -> ToolPolicyV1:
        return self._policy(tool)

    async def policy_view(self) -> PolicyViewV1:
        return PolicyViewV1(version="test", tools=[self._policy(tool) for tool in self.actions])

    def policy_version_seen(self, version: str) -> None:
        pass

    async def _run(self, cmd: ExecuteToolV1) -> ToolResultV1:
        self.runs.append(cmd)
        if isinstance(self.run_answer, ReplyError):
            raise self.run_answer
        return self.run_answer

    read = draft = _run

    async def prepare(self, cmd: PrepareOperationV1) -> ReplyV1:
        self.prepares.append(cmd)
        if self.prepare_reply is not None:
            return self.prepare_reply
        self.operations[cmd.operation_id] = OperationStatusV1(operation_id=cmd.operation_id, tool=cmd.tool,
                                                              status="prepared")
        return ReplyV1.success({"operation_id": cmd.operation_id, "preview": {"operation": cmd.tool}})

    async def request_approval(self, cmd: RequestApprovalV1) -> ApprovalRecordV1:
        self.requests.append(cmd)
        return approval_record(cmd.session_id, cmd.call_id, f"pa_{len(self.requests)}", cmd.operation_id,
                               cmd.arguments, cmd.fingerprint, cmd.tool)

    async def commit(self, operation_id: str, grant: GrantV1) -> OperationStatusV1:
        self.commits.append((operation_id, grant))
        if isinstance(self.commit_answer, Exception):  # refused, or never reached the ERP
            raise self.commit_answer
        status = self.commit_answer
        result = {"committed": operation_id} if status == "committed" else None
        error = {"code": "insufficient_stock", "message": "not enough stock"} if status == "rejected" else None
        answer = OperationStatusV1(operation_id=operation_id, tool="adjust_stock", status=status, result=result,
                                   error=error)
        self.operations[operation_id] = answer
        if self.lose_answer:  # committed, but the answer never comes back
            self.lose_answer = False
            raise ServiceUnavailable("cmd.erp.commit", "no answer in time")
        return answer

    async def operation_status(self, operation_id: str) -> OperationStatusV1:
        if operation_id not in self.operations:
            raise reply_error("not_found", f"operation {operation_id} not found", 404)
        return self.operations[operation_id]


def reply_error(code: str, message: str, status: int) -> ReplyError:
    return ReplyError("test.subject", ReplyV1.failure(code, message, status))


def approval_record(session_id: str, call_id: str, pending_id: str, operation_id: str, arguments: dict,
                    fingerprint: str, tool: str = "adjust_stock", **extra: Any) -> ApprovalRecordV1:
    """The approval service's record of a pending approval (``extra``: e.g. an edit's ``supersedes``)."""
    return ApprovalRecordV1(
        pending_id=pending_id, call_id=call_id, session_id=session_id, tool=tool, arguments=arguments,
        fingerprint=fingerprint, operation_id=operation_id, risk="low", preview={"operation": tool},
        required_roles=["manager"], requested_by=OWNER, created_at=CREATED,
        expires_at=CREATED + timedelta(minutes=15), status="pending", policy_version="test", **extra)


@pytest.fixture
def store() -> MemoryCallStore:
    return MemoryCallStore({SESSION: OWNER})


@pytest.fixture
def downstream() -> FakeDownstream:
    return FakeDownstream()


@pytest.fixture
def finished() -> list[str]:
    return []


@pytest.fixture
def service(store, downstream, finished) -> ToolCallService:
    async def on_finished(call_key: str) -> None:
        finished.append(call_key)

    return ToolCallService(store.unit_of_work, downstream, public_url="https://erpilot.test/",
                           on_finished=on_finished)


class Helpers:
    """What the tests build from the fakes' answers: the approval service's records, errors, grants."""

    session, owner = SESSION, OWNER
    reply_error = staticmethod(reply_error)
    approval_record = staticmethod(approval_record)

    @staticmethod
    def grant(pending_id: str, operation_id: str, decided_by: str = "mgr") -> GrantV1:
        return GrantV1(pending_id=pending_id, operation_id=operation_id, fingerprint="fp", decided_by=decided_by,
                       decided_at=CREATED, signature="sig")


@pytest.fixture
def make() -> type[Helpers]:
    return Helpers
