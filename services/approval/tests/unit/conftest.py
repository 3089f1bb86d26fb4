"""Factories shared by the approval unit tests, and the use cases on the in-memory store (``desk``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_approval.adapters.memory_store import ApprovalState, MemoryApprovalStore
from erpilot_approval.domain.approvals import ApprovalRequest, PendingApproval, new_pending
from erpilot_approval.domain.policy import Policy, load_policy
from erpilot_approval.service_layer.decisions import decide
from erpilot_approval.service_layer.ports import Ports
from erpilot_approval.service_layer.requests import request_approval
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import Actor, DecideV1, RequestApprovalV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import PreparedOperationV1, PreparedRecordV1, PrepareOperationV1, PreviewV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_platform.broker import ReplyError

NOW = datetime(2026, 10, 19, 12, 0, 0, tzinfo=UTC)

TOOL_ARGUMENTS: dict[str, dict[str, Any]] = {
    "submit_order": {"draft_id": "D-1", "revision": 2},
    "cancel_order": {"order_id": "O-1"},
    "adjust_stock": {"sku": "SKU-1", "delta": -3, "reason": "count"},
    "refund_payment": {"order_id": "O-1", "amount_minor": 500, "currency": "EUR", "channel": "original"},
}


def build_request(
    tool: str = "submit_order", amount_minor: int | None = 12_345, **changes: Any
) -> ApprovalRequest:
    """A well-formed request for ``tool`` whose fingerprint matches its arguments."""
    arguments = changes.pop("arguments", TOOL_ARGUMENTS[tool])
    preview = {"operation": tool, "object": "x", "target": "y", "amount_minor": amount_minor}
    fields: dict[str, Any] = {
        "call_id": "call-1",
        "session_id": "sess-1",
        "tool": tool,
        "arguments": arguments,
        "tool_schema_version": 1,
        "fingerprint": fingerprint(tool, 1, arguments),
        "operation_id": "op-1",
        "preview": preview,
        "requested_by": "alice",
    }
    return ApprovalRequest(**{**fields, **changes})


@pytest.fixture
def now() -> datetime:
    return NOW


@pytest.fixture(name="build_request")
def build_request_fixture() -> Callable[..., ApprovalRequest]:
    return build_request


@pytest.fixture
def policy() -> Policy:
    return load_policy(None)


@pytest.fixture
def make_pending(policy: Policy) -> Callable[..., PendingApproval]:
    """``make_pending(tool=..., amount_minor=..., policy=...)``: a fresh pending approval created at NOW."""

    def make(tool: str = "submit_order", amount_minor: int | None = 12_345, **kwargs: Any) -> PendingApproval:
        chosen = kwargs.pop("policy", policy)
        return new_pending(build_request(tool, amount_minor, **kwargs), chosen, NOW, "pa-1")

    return make


# --- the use cases on the in-memory store -----------------------------------------------------------------

class FakeErp:
    """The ERP as the approval service sees it: the operations it prepared, and the previews it gives edits
    (``refusal``: the error every ``prepare`` answers with instead)."""

    def __init__(self) -> None:
        self.operations: dict[str, PreparedRecordV1] = {}
        self.prepares: list[PrepareOperationV1] = []
        self.refusal: ReplyV1 | None = None

    def record(self, cmd: RequestApprovalV1) -> None:
        """Hold ``cmd``'s operation as prepared, exactly as the request says (the ledger agrees)."""
        self.operations[cmd.operation_id] = PreparedRecordV1(
            operation_id=cmd.operation_id, tool=cmd.tool, session_id=cmd.session_id, call_id=cmd.call_id,
            requested_by=cmd.requested_by, arguments=cmd.arguments, fingerprint=cmd.fingerprint,
            preview=cmd.preview, status="prepared")

    async def prepared(self, operation_id: str) -> PreparedRecordV1 | None:
        return self.operations.get(operation_id)

    async def prepare(self, cmd: PrepareOperationV1) -> PreparedOperationV1:
        self.prepares.append(cmd)
        if self.refusal is not None:
            raise ReplyError(subjects.ERP_CMD_PREPARE, self.refusal)
        preview = PreviewV1(operation="Submit order", object=f"Draft {cmd.arguments.get('draft_id')}",
                            target="Nordwind", amount_minor=4_200, currency="EUR")
        return PreparedOperationV1(operation_id=cmd.operation_id, tool=cmd.tool, fingerprint=cmd.fingerprint,
                                   preview=preview)


class Desk:
    """The approval use cases on a ``MemoryApprovalStore`` (clock at NOW) and a ``FakeErp``."""

    def __init__(self, policy: Policy) -> None:
        self.store = MemoryApprovalStore(clock=NOW)
        self.erp = FakeErp()
        self.deadlines = 0
        self.ports = Ports(store=self.store, erp=self.erp, policy=policy, signing_key=SIGNING_KEY,
                           new_deadline=self._new_deadline)
        self._ids = itertools.count(1)

    def _new_deadline(self) -> None:
        self.deadlines += 1

    @property
    def state(self) -> ApprovalState:
        return self.store.state

    def approval(self, pending_id: str) -> PendingApproval:
        return self.state.approvals[pending_id]

    def events(self, subject: str) -> list[dict[str, Any]]:
        return self.store.events(subject)

    def request_cmd(self, tool: str = "submit_order", amount_minor: int | None = 12_345, **changes: Any
                    ) -> RequestApprovalV1:
        """A request for a new operation (fresh ids) that the fake ERP prepared exactly so."""
        n = next(self._ids)
        ids = {"call_id": f"call-{n}", "operation_id": f"op-{n}"}
        cmd = RequestApprovalV1(**asdict(build_request(tool, amount_minor, **{**ids, **changes})))
        self.erp.record(cmd)
        return cmd

    async def request(self, tool: str = "submit_order", **changes: Any) -> dict[str, Any]:
        """A new pending approval (its record as answered)."""
        reply = await request_approval(self.request_cmd(tool, **changes), self.ports)
        assert reply.ok, reply
        return reply.data

    async def decide(self, record: dict[str, Any], action: str, sub: str, *roles: str,
                     fingerprint: str | None = None, comment: str | None = None) -> ReplyV1:
        cmd = DecideV1(pending_id=record["pending_id"], action=action, actor=Actor(sub=sub, roles=list(roles)),
                       fingerprint=fingerprint or record["fingerprint"], comment=comment)
        return await decide(cmd, self.ports)


SIGNING_KEY = Ed25519PrivateKey.generate()


@pytest.fixture
def desk(policy: Policy) -> Desk:
    return Desk(policy)
