"""Factories shared by the approval unit tests, and the use cases on the memory unit of work (``desk``)."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_approval.domain.approvals import ApprovalRequest, PendingApproval, new_pending
from erpilot_approval.domain.policy import Policy, load_policy
from erpilot_approval.service_layer.decisions import decide
from erpilot_approval.service_layer.ports import Ports
from erpilot_approval.service_layer.requests import request_approval
from erpilot_contracts.approval.v1 import Actor, ApprovalRecordV1, DecideV1, RequestApprovalV1
from erpilot_contracts.fingerprint import fingerprint
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.ledger_signatures import sign_request
from erpilot_platform.refusals import Refused
from erpilot_platform.testing.previews import preview_json

from ..fakes import LEDGER_KEY, NOW, ApprovalState, FakeErp, MemoryApprovals

TOOL_ARGUMENTS: dict[str, dict[str, Any]] = {
    "submit_order": {"draft_id": "D-1", "revision": 2},
    "cancel_order": {"order_id": "O-1"},
    "adjust_stock": {"sku": "SKU-1", "delta": -3, "reason": "count"},
    "refund_payment": {"order_id": "O-1", "amount_minor": 500, "currency": "EUR", "channel": "original"},
}
SIGNING_KEY = Ed25519PrivateKey.generate()
ASSERTION_KEY = Ed25519PrivateKey.generate()  # the gateway's


def build_request(
    tool: str = "submit_order", amount_minor: int | None = 12_345, **changes: Any
) -> ApprovalRequest:
    """A well-formed request for ``tool`` whose fingerprint matches its arguments."""
    arguments = changes.pop("arguments", TOOL_ARGUMENTS[tool])
    preview = preview_json(operation=tool, object="x", target="y", amount_minor=amount_minor)
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


def vouched(request: ApprovalRequest, *, key: Ed25519PrivateKey = ASSERTION_KEY, at: datetime = NOW,
            **claims: Any) -> RequestApprovalV1:
    """The ledger's ``cmd.approval.request`` for ``request``: with the gateway's assertion for its requester in
    its session, accepted by the ledger at ``at`` (``claims``: other ``sub`` / ``session_id`` to sign, or the
    ``run_id`` of the chat run whose assertion it carries), and signed by the ledger (``LEDGER_KEY``)."""
    bound = ({"run_id": claims["run_id"]} if "run_id" in claims
             else {"call_id": claims.get("call_id", request.call_id), "tool": claims.get("tool", request.tool)})
    assertion = sign_assertion(key, sub=claims.get("sub", request.requested_by), roles=["requester"],
                               session_id=claims.get("session_id", request.session_id), now=at, **bound)
    return signed(RequestApprovalV1(**asdict(request), assertion=assertion, asserted_at=at, prepared_at=at))


def signed(cmd: RequestApprovalV1, key: Ed25519PrivateKey = LEDGER_KEY) -> RequestApprovalV1:
    """``cmd`` as the ledger sends it: signed with its key (``key``: another one, to forge)."""
    return sign_request(cmd, key)


async def refusal_of(call: Awaitable[Any]) -> Refused:
    """The refusal ``call`` raises (a use case answers typed, or raises ``Refused``)."""
    with pytest.raises(Refused) as raised:
        await call
    return raised.value


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


# --- the use cases on the memory unit of work --------------------------------------------------------------

class Desk:
    """The approval use cases on ``MemoryApprovals`` (clock at NOW) and a ``FakeErp`` that sends the requests
    of edited operations back to ``request_approval``."""

    def __init__(self, policy: Policy) -> None:
        self.uow = MemoryApprovals(now=NOW, key=SIGNING_KEY)
        self.erp = FakeErp()
        self.deadlines = 0
        self.ports = Ports(unit=self.uow, erp=self.erp, policy=policy, signing_key=SIGNING_KEY,
                           assertion_key=ASSERTION_KEY.public_key(), ledger_key=LEDGER_KEY.public_key(),
                           new_deadline=self._new_deadline)
        self.erp.deliver = lambda cmd: request_approval(cmd, self.ports)
        self._ids = itertools.count(1)

    def _new_deadline(self) -> None:
        self.deadlines += 1

    @property
    def state(self) -> ApprovalState:
        return self.uow.state

    def approval(self, pending_id: str) -> PendingApproval:
        return self.state.approvals[pending_id]

    def events(self, subject: str) -> list[dict[str, Any]]:
        return self.uow.events(subject)

    def request_cmd(self, tool: str = "submit_order", amount_minor: int | None = 12_345, *,
                    run_id: str | None = None, **changes: Any) -> RequestApprovalV1:
        """The ledger's request for a new operation (fresh ids), vouched for by the gateway (``run_id``: a call
        ``<run_id>:<n>`` of that chat run, with the run's assertion); the fake ERP holds it as its record of the
        operation."""
        n = next(self._ids)
        ids = {"call_id": f"call-{n}" if run_id is None else f"{run_id}:call_{n}", "operation_id": f"op-{n}"}
        request = build_request(tool, amount_minor, **{**ids, **changes})
        cmd = vouched(request) if run_id is None else vouched(request, run_id=run_id)
        self.erp.record(cmd)
        return cmd

    async def request(self, tool: str = "submit_order", **changes: Any) -> dict[str, Any]:
        """A new pending approval (its record as answered, as JSON)."""
        record = await request_approval(self.request_cmd(tool, **changes), self.ports)
        return record.model_dump(mode="json")

    async def decide(self, record: dict[str, Any], action: str, sub: str, *roles: str,
                     fingerprint: str | None = None, comment: str | None = None) -> ApprovalRecordV1:
        cmd = DecideV1(pending_id=record["pending_id"], action=action, actor=Actor(sub=sub, roles=list(roles)),
                       fingerprint=fingerprint or record["fingerprint"], comment=comment)
        return await decide(cmd, self.ports)


@pytest.fixture
def desk(policy: Policy) -> Desk:
    return Desk(policy)
