"""``/v1/standing-approvals`` (SPEC §11): a strict body, the command names the authenticated person (never one from
the body) with a fresh ``standing_id``; 201, 204 on revoke, the list as ``{items}``; approvers and managers give;
the approval service's refusals pass through."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from erpilot_contracts import subjects
from erpilot_gateway.problems import Problem

from .fake_services import RecordingServices, gateway_client, sending

pytestmark = pytest.mark.unit

SECRET = "gateway-test-secret-" + "e" * 32
UNTIL = "2026-12-04T18:00:00Z"


def standing(standing_id: str, **changes: Any) -> dict:
    return {"standing_id": standing_id, "given_by": "bob", "session_id": "ses_1", "tool": "submit_order",
            "max_amount_minor": 5000, "until": UNTIL, "roles": ["approver"], "created_at": "2026-12-01T09:00:00Z",
            "revoked_at": None, **changes}


def answer(subject: str, payload: Any) -> dict:
    if subject == subjects.APPROVAL_CMD_STAND:
        if payload.tool == "refund_payment":
            raise Problem(403, "standing_beyond_authority", "deciding refund_payment needs a manager")
        return standing(payload.standing_id, tool=payload.tool, max_amount_minor=payload.max_amount_minor)
    if subject == subjects.APPROVAL_CMD_REVOKE_STANDING:
        if payload.standing_id != "sa_mine":
            raise Problem(404, "not_found", "standing approval not found")
        return standing(payload.standing_id, revoked_at="2026-12-01T10:00:00Z")
    if subject == subjects.APPROVAL_QUERY_STANDING:
        return {"items": [standing("sa_mine")]}
    raise AssertionError(subject)


def token(sub: str = "bob", roles: tuple[str, ...] = ("approver",)) -> str:
    return jwt.encode({"sub": sub, "roles": list(roles), "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256")


FAKE = RecordingServices(answer)
CLIENT = gateway_client(FAKE, SECRET)
SESSION = FAKE.new_session_id("alice")  # a session the gateway bound to its owner
BODY = {"session_id": SESSION, "tool": "submit_order", "max_amount_minor": 5000, "until": UNTIL}


def post(body: Any, who: str | None = None):
    return CLIENT.post("/v1/standing-approvals", json=body, headers={"Authorization": f"Bearer {who or token()}"})


def test_a_give_is_201_for_the_authenticated_person():
    response, sent = sending(FAKE, lambda: post(BODY))

    assert response.status_code == 201, response.text
    [(subject, cmd)] = sent
    assert subject == subjects.APPROVAL_CMD_STAND
    assert (cmd.actor.sub, cmd.actor.roles, cmd.session_id, cmd.max_amount_minor) == ("bob", ["approver"], SESSION,
                                                                                      5000)
    assert cmd.standing_id.startswith("sa_") and response.json()["standing_id"] == cmd.standing_id


@pytest.mark.parametrize("body", [
    {**BODY, "given_by": "carl"},  # no one gives in another's name
    {**BODY, "until": "2026-12-04T18:00:00"},  # no time zone
    {**BODY, "until": 1796400000},
    {**BODY, "max_amount_minor": "5000"},
    {**BODY, "max_amount_minor": 2**53},
    {key: value for key, value in BODY.items() if key != "session_id"},
    {key: value for key, value in BODY.items() if key != "until"},
])
def test_a_malformed_give_is_422_and_sends_nothing(body):
    response, sent = sending(FAKE, lambda: post(body))

    assert response.status_code == 422, response.text
    assert sent == []


@pytest.mark.parametrize("session_id", ["ses_0123456789abcdef0123", "sess-1", "ses_x_" + "0" * 32])
def test_a_session_the_gateway_did_not_bind_to_its_owner_takes_no_standing_approval(session_id):
    """Security review of #32: a legacy session's owner is the agent's word, so a standing approval there could
    approve writes someone else was made the requester of; the give is 422 and nothing is sent."""
    response, sent = sending(FAKE, lambda: post({**BODY, "session_id": session_id}))

    assert (response.status_code, response.json()["code"], sent) == (422, "session_predates_standing_approvals", [])


def test_only_approvers_and_managers_give_and_the_services_refusals_pass_through():
    response, sent = sending(FAKE, lambda: post(BODY, token("rita", ("requester",))))
    assert (response.status_code, response.json()["code"], sent) == (403, "forbidden", [])

    beyond = post({**BODY, "tool": "refund_payment"})
    assert (beyond.status_code, beyond.json()["code"]) == (403, "standing_beyond_authority")


def test_a_revoke_is_204_someone_elses_404_and_the_list_is_items():
    auth = {"Authorization": f"Bearer {token()}"}
    response, sent = sending(FAKE, lambda: CLIENT.delete("/v1/standing-approvals/sa_mine", headers=auth))
    assert (response.status_code, response.content) == (204, b"")
    assert [(subject, cmd.actor.sub) for subject, cmd in sent] == [(subjects.APPROVAL_CMD_REVOKE_STANDING, "bob")]
    assert CLIENT.delete("/v1/standing-approvals/sa_theirs", headers=auth).status_code == 404

    listed = CLIENT.get("/v1/standing-approvals", headers=auth)
    assert [s["standing_id"] for s in listed.json()["items"]] == ["sa_mine"]
    assert CLIENT.get("/v1/standing-approvals").status_code == 401
