"""Everyone who shaped a version is a party to it (the ledger's part, where the preview and the requester come
from, is ``test_request_commands``: the request is built by the ledger and vouched for by the gateway)."""

from __future__ import annotations

import pytest

from erpilot_approval.domain.approvals import ApprovalError, decide
from erpilot_approval.domain.edits import edited_version
from erpilot_approval.domain.permissions import can_decide
from erpilot_approval.service_layer.mapping import record_of

from ..fakes import NOW

pytestmark = pytest.mark.unit


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
