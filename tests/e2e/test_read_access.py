"""Drafts and orders are their session's (SPEC §10, issue 26's low finding "any requester reads any session's
draft or order by its sequential id"): `GET /v1/erp/drafts/{id}` and `/v1/erp/orders/{id}` answer the owner of the
session they came from, an approver or manager who may decide an approval naming them, and an admin; anyone else
gets exactly the 404 of an id that does not exist. Through HTTP only, on the e2e stack."""

from __future__ import annotations

import time

import pytest

from tests.e2e.conftest import Api
from tests.e2e.test_trust_boundaries import BIG_ORDER
from tests.e2e.test_write_flow import decide, draft, finished, request_write

pytestmark = pytest.mark.e2e


def person(stack, name: str, *roles: str) -> Api:
    return Api(stack.base_url, f"{name}-{time.monotonic_ns()}", *roles)


def assert_like_unknown(api: Api, path: str, unknown_path: str, **params: object) -> None:
    """``path`` answers ``api`` exactly as an id that does not exist does (status, code, title; the detail names
    the id asked for)."""
    response, unknown = api.get(path, **params), api.get(unknown_path, **params)
    assert response.status_code == unknown.status_code == 404, response.text
    shown, expected = response.json(), unknown.json()
    assert {key: shown[key] for key in ("type", "title", "status", "code")} == \
        {key: expected[key] for key in ("type", "title", "status", "code")}
    assert shown["detail"] == expected["detail"].replace(unknown_path.rsplit("/", 1)[1], path.rsplit("/", 1)[1])
    assert all(f"{name} {value}" in shown["detail"] for name, value in params.items())


def test_a_draft_and_its_order_are_read_by_the_owner_an_approver_who_may_decide_and_an_admin_only(
        stack, requester: Api, approver: Api, admin: Api):
    other = person(stack, "eve", "requester")
    session_id = requester.new_session()
    revision = draft(requester, session_id, [("SKU-PAPER-A4", 1)])
    draft_path = f"/v1/erp/drafts/{revision['draft_id']}"

    assert requester.get(draft_path).status_code == 200
    assert_like_unknown(other, draft_path, "/v1/erp/drafts/D-99999999")  # got 200 before
    assert_like_unknown(approver, draft_path, "/v1/erp/drafts/D-99999999")  # no approval names it yet

    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    for reader in (requester, approver, admin):
        response = reader.get(draft_path)
        assert response.status_code == 200, (reader.sub, response.text)
        assert response.json()["draft_id"] == revision["draft_id"] and "session_id" not in response.json()
    assert_like_unknown(other, draft_path, "/v1/erp/drafts/D-99999999")
    assert_like_unknown(other, draft_path, "/v1/erp/drafts/D-99999999", revision=1)

    assert decide(approver, pending, "approve").status_code == 200
    order = finished(requester, session_id, pending["call_id"])["result"]
    order_path = f"/v1/erp/orders/{order['order_id']}"
    for reader in (requester, approver, admin):
        response = reader.get(order_path)
        assert response.status_code == 200, (reader.sub, response.text)
        # The order as the call's result showed it, no session id added; the view adds its credit notes (none).
        assert response.json() == {**order, "credit_notes": []}
    assert_like_unknown(other, order_path, "/v1/erp/orders/O-99999999")  # got 200 before


def test_an_approver_who_may_not_decide_the_approval_naming_it_gets_404(stack, requester: Api, manager: Api):
    """A large order is a manager's decision (default policy): an approver has no approval naming it to decide."""
    approver_only = person(stack, "bob", "approver")
    session_id = requester.new_session()
    revision = draft(requester, session_id, BIG_ORDER)
    pending = request_write(requester, session_id, "submit_order",
                            {"draft_id": revision["draft_id"], "revision": revision["revision"]})
    assert manager.get(f"/v1/approvals/{pending['pending_id']}").json()["required_roles"] == ["manager"]
    draft_path = f"/v1/erp/drafts/{revision['draft_id']}"

    assert manager.get(draft_path).status_code == 200
    assert_like_unknown(approver_only, draft_path, "/v1/erp/drafts/D-99999999")


def test_an_order_no_session_made_is_the_back_offices(stack, requester: Api):
    seeded = requester.get("/v1/erp/orders/O-5001")
    assert seeded.status_code == 200 and "session_id" not in seeded.json()
