"""Factories shared by the approval domain tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from erpilot_approval.domain.approvals import PendingApproval, new_pending
from erpilot_approval.domain.policy import Policy, load_policy
from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.fingerprint import fingerprint

NOW = datetime(2026, 10, 19, 12, 0, 0, tzinfo=UTC)

TOOL_ARGUMENTS: dict[str, dict[str, Any]] = {
    "submit_order": {"draft_id": "D-1", "revision": 2},
    "cancel_order": {"order_id": "O-1"},
    "adjust_stock": {"sku": "SKU-1", "delta": -3, "reason": "count"},
    "refund_payment": {"order_id": "O-1", "amount_minor": 500, "currency": "EUR", "channel": "original"},
}


def build_request(
    tool: str = "submit_order", amount_minor: int | None = 12_345, **changes: Any
) -> RequestApprovalV1:
    """A well-formed request for ``tool`` whose fingerprint matches its arguments."""
    arguments = changes.pop("arguments", TOOL_ARGUMENTS[tool])
    preview = {"operation": tool, "object": "x", "target": "y", "amount_minor": amount_minor}
    fields: dict[str, Any] = {
        "call_id": "call-1",
        "session_id": "sess-1",
        "tool": tool,
        "arguments": arguments,
        "fingerprint": fingerprint(tool, 1, arguments),
        "operation_id": "op-1",
        "preview": preview,
        "requested_by": "alice",
    }
    return RequestApprovalV1(**{**fields, **changes})


@pytest.fixture
def now() -> datetime:
    return NOW


@pytest.fixture(name="build_request")
def build_request_fixture() -> Callable[..., RequestApprovalV1]:
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
