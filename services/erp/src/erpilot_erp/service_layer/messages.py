"""The ledger's records as the messages other services read (domain and port values -> contracts).

The approval request is built here from the ledger's own record of a prepared operation: what a person is asked
to approve (tool, arguments, fingerprint, preview) and who asked (requester, assertion) come from what the ERP
stored, never from the message that asked it to prepare.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from erpilot_contracts.approval.v1 import RequestApprovalV1
from erpilot_contracts.base import ErrorV1
from erpilot_contracts.erp.v1 import (
    CustomerListV1,
    DraftRevisionV1,
    OperationStatusV1,
    OrderV1,
    PreviewV1,
    ProductListV1,
    ProductV1,
)
from erpilot_erp.domain.model import CreditNote, Customer, Order, Product
from erpilot_erp.service_layer.ports import OperationRecord, StoredRevision


def operation_status(record: OperationRecord) -> OperationStatusV1:
    """The status of a stored operation, as ``query.erp.operation``, commits and the event tell it."""
    return OperationStatusV1(
        operation_id=record.operation_id, tool=record.tool, status=record.status, session_id=record.session_id,
        call_id=record.call_id, requested_by=record.requested_by, pending_id=record.grant_pending_id,
        decided_by=record.decided_by, result=record.result,
        error=ErrorV1.model_validate(record.error) if record.error else None, committed_at=record.committed_at)


def preview(stored: dict[str, Any]) -> PreviewV1:
    """A stored preview (the domain's JSON, ``plans.preview``) as it travels to the approval and to people."""
    return PreviewV1.model_validate(stored)


def approval_request(record: OperationRecord, agent_reason: str | None = None) -> RequestApprovalV1:
    """``cmd.approval.request`` for a prepared operation, from the ledger's record alone, and the agent's words on
    why it asks (``agent_reason``: passed on as its claim, which decides nothing)."""
    return RequestApprovalV1(
        operation_id=record.operation_id, session_id=record.session_id, call_id=record.call_id, tool=record.tool,
        tool_schema_version=record.tool_schema_version, arguments=record.arguments, fingerprint=record.fingerprint,
        preview=preview(record.preview), requested_by=record.requested_by, assertion=record.assertion,
        asserted_at=record.asserted_at, prepared_at=record.prepared_at, supersedes=record.supersedes,
        agent_reason=agent_reason)


def product(value: Product) -> ProductV1:
    return ProductV1.model_validate(value.to_result())


def products(values: list[Product]) -> ProductListV1:
    return ProductListV1(items=[product(value) for value in values])


def customers(values: list[Customer]) -> CustomerListV1:
    return CustomerListV1.model_validate({"items": [value.to_result() for value in values]})


def order(value: Order, credit_notes: Sequence[CreditNote] = ()) -> OrderV1:
    """The order view, with its credit notes, the session it came from and its owner (the gateway decides who may
    see it)."""
    return OrderV1.model_validate({**order_result(value, credit_notes), "session_id": value.session_id,
                                   "owner": value.owner})


def order_result(value: Order, credit_notes: Sequence[CreditNote]) -> dict[str, Any]:
    """``get_order``'s result: the order and the credit notes issued against it, oldest first."""
    return {**value.to_result(), "credit_notes": [note.to_result() for note in credit_notes]}


def draft_revision(stored: StoredRevision) -> DraftRevisionV1:
    """The draft view, with its session and owner (the gateway decides who may see it)."""
    return DraftRevisionV1.model_validate({**stored.revision.to_result(), "latest_revision": stored.latest_revision,
                                           "session_id": stored.revision.session_id,
                                           "owner": stored.revision.owner})
