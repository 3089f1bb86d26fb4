"""The approval's truth comes from the ledger, and everyone who shaped a version is a party to it."""

from __future__ import annotations

import pytest

from erpilot_approval.domain.approvals import ApprovalError, can_decide, decide
from erpilot_approval.domain.edits import edited_version
from erpilot_approval.domain.ledger import LedgerRecord, as_the_ledger_prepared, require_prepared
from erpilot_approval.service_layer.mapping import record_of

from .conftest import NOW, build_request


def ledger_of(request, **changes) -> LedgerRecord:
    values = dict(operation_id=request.operation_id, tool=request.tool, session_id=request.session_id,
                  call_id=request.call_id, requested_by=request.requested_by, arguments=request.arguments,
                  fingerprint=request.fingerprint, preview=request.preview, status="prepared")
    return LedgerRecord(**{**values, **changes})


def test_a_request_that_agrees_with_the_ledger_carries_the_ledgers_preview() -> None:
    request = build_request("submit_order", amount_minor=5_000_000)
    checked = as_the_ledger_prepared(request, ledger_of(request))
    assert checked.preview == request.preview
    require_prepared(ledger_of(request))


@pytest.mark.parametrize("changes", [
    {"preview": {"operation": "submit_order", "object": "x", "target": "y", "amount_minor": 5_000_000}},
    {"fingerprint": "sha256:" + "1" * 64},
    {"arguments": {"draft_id": "D-1", "revision": 3}},
    {"tool": "cancel_order"},
    {"session_id": "another"},
    {"call_id": "another"},
    {"requested_by": "mallory"},
])
def test_any_difference_from_the_ledger_is_an_invalid_request(changes) -> None:
    request = build_request("submit_order", amount_minor=1)  # the agent claims a total of 0.01
    with pytest.raises(ApprovalError) as refused:
        as_the_ledger_prepared(request, ledger_of(request, **changes))
    assert (refused.value.code, refused.value.http_status) == ("invalid_request", 422)


def test_an_operation_the_ledger_never_prepared_or_already_finished_is_refused() -> None:
    request = build_request()
    with pytest.raises(ApprovalError, match="never prepared"):
        as_the_ledger_prepared(request, None)
    with pytest.raises(ApprovalError, match="already committed"):
        require_prepared(ledger_of(request, status="committed"))


def test_every_editor_in_the_chain_is_a_party_under_separation_of_duties(make_pending) -> None:
    first = make_pending("refund_payment", requested_by="bob")
    second = edited_version(make_pending("refund_payment", requested_by="bob"), first, "ann")
    third = edited_version(make_pending("refund_payment", requested_by="bob"), second, "carl")
    assert (second.edited_by, second.editors) == ("ann", ("ann",))
    assert (third.edited_by, third.editors, third.parties) == ("carl", ("ann", "carl"), {"bob", "ann", "carl"})
    assert record_of(third).edited_by == "carl"
    for party in ("bob", "ann", "carl"):
        with pytest.raises(ApprovalError) as refused:
            decide(third, "approve", third.fingerprint, party, ["manager"], None, NOW)
        assert (refused.value.code, refused.value.http_status) == ("separation_of_duties", 403)
        assert can_decide(third, party, ["manager"], "reject")
    assert decide(third, "approve", third.fingerprint, "dora", ["manager"], None, NOW).approval.status == "approved"


def test_an_editor_who_edits_again_is_listed_once(make_pending) -> None:
    first = make_pending("refund_payment")
    again = edited_version(make_pending("refund_payment"), edited_version(make_pending("refund_payment"), first, "ann"),
                           "ann")
    assert again.editors == ("ann",)
