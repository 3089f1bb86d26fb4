"""Who reads a draft or an order over HTTP (SPEC §10): its owner as the ERP recorded it (the person who created the
draft; an order: its draft's), an approver or manager who may decide an approval naming it (an order: it or its
draft), an admin; every requester an order no session made; anyone else the very 404 an unknown id gets. The session
id and the owner the ERP gives the gateway are never shown, and the agent is never asked.

The gateway runs in-process; the ERP, the agent and the approval service are a fake that answers from a small
world: draft D-1 and order O-1 (made from D-1) that Alice created in her session, the seeded order O-5001, draft D-0
made before owners were recorded, an approval naming D-1 that Bob may decide. The fake agent is a compromised one:
it says every session is whoever asks's.
"""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from erpilot_contracts import subjects
from erpilot_contracts.base import ErrorV1
from erpilot_gateway.problems import Problem

from .fake_services import RecordingServices, gateway_client

pytestmark = pytest.mark.unit

SECRET = "gateway-test-secret-" + "r" * 32
DRAFT = {"draft_id": "D-1", "revision": 2, "status": "submitted", "customer_id": "C-1", "customer_name": "Acme",
         "lines": [], "total_amount_minor": 100, "currency": "EUR", "note": None,
         "valid_until": "2026-10-02T12:00:00+00:00", "created_at": "2026-10-01T12:00:00+00:00", "latest_revision": 2}
ORDER = {"order_id": "O-1", "status": "placed", "customer_id": "C-1", "customer_name": "Acme", "lines": [],
         "total_amount_minor": 100, "currency": "EUR", "paid_minor": 100, "refunded_minor": 0, "draft_id": "D-1",
         "revision": 2, "created_at": "2026-10-01T12:00:00+00:00",
         "credit_notes": [{"credit_note_id": "CN-9101", "order_id": "O-1", "amount_minor": 30, "currency": "EUR",
                           "reason": "damaged", "remaining_minor": 70}]}
VIEWS = {("draft", "D-1"): {**DRAFT, "session_id": "ses_alice", "owner": "alice"},
         ("draft", "D-0"): {**DRAFT, "draft_id": "D-0", "session_id": "ses_alice", "owner": None},
         ("order", "O-1"): {**ORDER, "session_id": "ses_alice", "owner": "alice"},
         ("order", "O-5001"): {**ORDER, "order_id": "O-5001", "draft_id": None, "revision": None, "session_id": None,
                               "owner": None}}
# (person, draft ids asked about) -> the approval naming one of them that this person may decide
DECIDES = {"bob": {"D-1": "pa_submit"}}


def answer(subject: str, payload: Any) -> dict:
    if subject == subjects.ERP_QUERY_VIEW:
        if (payload.view, payload.id) not in VIEWS:
            raise Problem.from_error(ErrorV1(code="not_found", message=f"{payload.view} {payload.id} not found",
                                             status=404))
        return VIEWS[(payload.view, payload.id)]
    if subject == subjects.AGENT_QUERY_SESSION:  # a compromised agent: "yes, the session is yours"
        return {"session_id": payload.session_id, "owner": payload.owner, "title": None,
                "created_at": "2026-10-01T12:00:00Z", "last_seq": 3, "run_status": "idle"}
    if subject == subjects.APPROVAL_QUERY_REFERRING:
        found = [DECIDES.get(payload.actor.sub, {}).get(draft) for draft in payload.draft_ids]
        return {"pending_id": next((pid for pid in found if pid), None)}
    raise AssertionError(f"unexpected {subject}")


@pytest.fixture
def services() -> RecordingServices:
    return RecordingServices(answer)


def get(services: RecordingServices, path: str, sub: str, *roles: str):
    client = gateway_client(services, SECRET)
    token = jwt.encode({"sub": sub, "roles": list(roles), "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256")
    return client.get(path, headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize("path", ["/v1/erp/drafts/D-1", "/v1/erp/orders/O-1"])
@pytest.mark.parametrize(("sub", "roles"), [("alice", ("requester",)), ("bob", ("approver",)),
                                            ("root", ("admin",)), ("bob", ("manager", "requester"))])
def test_the_owner_an_approver_of_an_approval_naming_it_and_an_admin_read_it_without_its_session_or_owner(
        services, path, sub, roles):
    response = get(services, path, sub, *roles)

    assert response.status_code == 200, response.text
    expected = DRAFT if "drafts" in path else ORDER
    assert response.json() == expected  # the ERP's view as it was, without the session id and the owner


@pytest.mark.parametrize("path", ["/v1/erp/drafts/D-1", "/v1/erp/orders/O-1"])
@pytest.mark.parametrize(("sub", "roles"), [("eve", ("requester",)), ("carl", ("approver",)),
                                            ("eve", ("requester", "manager"))])
def test_anyone_else_gets_the_404_of_an_unknown_id(services, path, sub, roles):
    response = get(services, path, sub, *roles)
    unknown = get(services, path.replace("-1", "-404"), sub, *roles)

    assert response.status_code == unknown.status_code == 404
    assert {**response.json(), "instance": "?", "detail": "?"} == {**unknown.json(), "instance": "?", "detail": "?"}
    assert response.json()["detail"] == unknown.json()["detail"].replace("-404", "-1")
    assert "ses_alice" not in response.text and "alice" not in response.text


@pytest.mark.parametrize("path", ["/v1/erp/drafts/D-1", "/v1/erp/orders/O-1"])
def test_a_requester_who_is_not_the_owner_gets_404_even_when_the_agent_claims_the_session_is_theirs(services, path):
    """The finding: the agent answered ``query.agent.session`` and a compromised one says yes to everyone."""
    response = get(services, path, "mallory", "requester")

    assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert subjects.AGENT_QUERY_SESSION not in [subject for subject, _ in services.queries]  # it is never asked


def test_a_draft_without_an_owner_is_nobodys_only_the_back_office_reads_it(services):
    assert get(services, "/v1/erp/drafts/D-0", "alice", "requester").status_code == 404
    assert get(services, "/v1/erp/drafts/D-0", "root", "admin").status_code == 200


def test_an_order_no_session_made_is_read_by_every_requester_and_a_revision_keeps_the_same_404(services):
    assert get(services, "/v1/erp/orders/O-5001", "eve", "requester").status_code == 200
    assert get(services, "/v1/erp/orders/O-5001", "carl", "approver").status_code == 404
    assert get(services, "/v1/erp/drafts/D-1?revision=2", "eve", "requester").json()["detail"] == \
        "draft D-1 revision 2 not found"


def test_an_approver_is_asked_about_an_order_and_the_draft_it_came_from_and_the_owner_check_comes_first(services):
    assert get(services, "/v1/erp/orders/O-1", "bob", "approver").status_code == 200
    asked = [payload for subject, payload in services.queries if subject == subjects.APPROVAL_QUERY_REFERRING]
    assert [(query.actor.sub, query.draft_ids, query.order_ids) for query in asked] == [("bob", ["D-1"], ["O-1"])]

    services.queries.clear()
    assert get(services, "/v1/erp/drafts/D-1", "alice", "requester", "approver").status_code == 200
    assert [subject for subject, _ in services.queries] == [subjects.ERP_QUERY_VIEW]
    services.queries.clear()
    assert get(services, "/v1/erp/drafts/D-1", "root", "admin").status_code == 200
    assert [subject for subject, _ in services.queries] == [subjects.ERP_QUERY_VIEW]
