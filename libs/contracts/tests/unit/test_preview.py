"""The ledger's preview, typed (``PreviewV1``): what it refuses, what it keeps, and that it writes itself back as
it was written (the approval service stores and shows it, and checks the ledger's signature over it)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from erpilot_contracts.approval.v1 import ApprovalRecordV1
from erpilot_contracts.erp.preview import PreviewV1

pytestmark = pytest.mark.unit

WRITTEN = {"operation": "Refund payment", "object": "Order O-1", "target": "Nordwind", "amount_minor": 500,
           "currency": "EUR", "effects": [{"label": "Refunded", "before": 0, "after": 500, "unit": "EUR"}],
           "notes": ["money leaves"], "details": {"payment_id": "PAY-1", "rate": 0.1 + 0.2}}


@pytest.mark.parametrize("amount", ["12", 12.0, 12.5, True, [12]])
def test_an_amount_that_is_not_an_integer_is_refused_never_read_as_no_amount(amount: object) -> None:
    # An amount rule's stricter roles depend on it: "12" or 12.0 must not slip through as 12, nor as None.
    with pytest.raises(ValidationError):
        PreviewV1.model_validate({**WRITTEN, "amount_minor": amount})
    with pytest.raises(ValidationError):
        PreviewV1.model_validate_json(json.dumps({**WRITTEN, "amount_minor": amount}))


@pytest.mark.parametrize("missing", ["operation", "object", "target"])
def test_what_a_person_must_see_is_required(missing: str) -> None:
    with pytest.raises(ValidationError):
        PreviewV1.model_validate({key: value for key, value in WRITTEN.items() if key != missing})


def test_it_writes_itself_back_as_written_without_a_schema_version() -> None:
    parsed = PreviewV1.model_validate_json(json.dumps(WRITTEN))
    assert parsed.model_dump(mode="json") == WRITTEN
    assert json.loads(parsed.model_dump_json()) == WRITTEN


def test_fields_a_newer_ledger_adds_are_kept_where_it_travels_on() -> None:
    newer = {**WRITTEN, "tax_minor": 95, "effects": [{**WRITTEN["effects"][0], "account": "1200"}]}
    record = ApprovalRecordV1.model_validate_json(json.dumps({
        "pending_id": "pa", "call_id": "c", "session_id": "s", "tool": "refund_payment", "arguments": {},
        "fingerprint": "f", "operation_id": "op", "risk": "high", "preview": newer, "required_roles": ["manager"],
        "requested_by": "alice", "created_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-01T01:00:00Z",
        "status": "pending", "policy_version": "v"}))
    assert record.preview.model_dump(mode="json") == newer
    assert record.model_dump(mode="json")["preview"] == newer


def test_as_received_is_the_json_it_came_from_only_while_unchanged() -> None:
    older = {"operation": "Adjust stock", "object": "SKU-A", "target": "SKU-A"}  # no defaults written
    parsed = PreviewV1.model_validate_json(json.dumps(older))
    assert parsed.as_received() == older
    assert parsed.model_copy(update={"target": "SKU-B"}).as_received()["target"] == "SKU-B"
    assert PreviewV1(**older).as_received() == PreviewV1(**older).model_dump(mode="json")  # built here: its own
