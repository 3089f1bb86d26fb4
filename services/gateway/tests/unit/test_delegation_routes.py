"""``/v1/delegations`` (SPEC §10): the body is strict, the command names the authenticated person (never one from
the body), a fresh ``delegation_id`` per give; 201 with the delegation, 204 on revoke, the list as ``{items}``;
the approval service's refusals pass through (422, 404)."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest

from erpilot_contracts import subjects
from erpilot_gateway.problems import Problem

from .fake_services import RecordingServices, gateway_client, sending

pytestmark = pytest.mark.unit

SECRET = "gateway-test-secret-" + "d" * 32
UNTIL = "2026-12-04T18:00:00Z"


def delegation(delegation_id: str, **changes: Any) -> dict:
    return {"delegation_id": delegation_id, "from": "bob", "to": "ana", "until": UNTIL, "tools": None,
            "roles": ["manager"], "created_at": "2026-12-01T09:00:00Z", "revoked_at": None, **changes}


def answer(subject: str, payload: Any) -> dict:
    if subject == subjects.APPROVAL_CMD_DELEGATE:
        if payload.to == payload.actor.sub:
            raise Problem(422, "delegation_to_self", "a delegation goes to someone else")
        return delegation(payload.delegation_id, to=payload.to, tools=payload.tools)
    if subject == subjects.APPROVAL_CMD_REVOKE_DELEGATION:
        if payload.delegation_id != "dlg_mine":
            raise Problem(404, "not_found", "delegation not found")
        return delegation(payload.delegation_id, revoked_at="2026-12-01T10:00:00Z")
    if subject == subjects.APPROVAL_QUERY_DELEGATIONS:
        return {"items": [delegation("dlg_mine")]}
    raise AssertionError(subject)


def token(sub: str = "bob", roles: tuple[str, ...] = ("manager",)) -> str:
    return jwt.encode({"sub": sub, "roles": list(roles), "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256")


FAKE = RecordingServices(answer)
CLIENT = gateway_client(FAKE, SECRET)


def post(body: Any, who: str | None = None, **headers: str):
    return CLIENT.post("/v1/delegations", json=body, headers={"Authorization": f"Bearer {who or token()}", **headers})


def test_a_give_is_201_with_the_delegation_for_the_authenticated_person():
    response, sent = sending(FAKE, lambda: post({"to": "ana", "until": UNTIL, "tools": ["submit_order"]}))

    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["from"], body["to"], body["tools"], body["until"]) == ("bob", "ana", ["submit_order"], UNTIL)
    [(subject, cmd)] = sent
    assert subject == subjects.APPROVAL_CMD_DELEGATE
    assert (cmd.actor.sub, cmd.actor.roles, cmd.to) == ("bob", ["manager"], "ana")
    assert cmd.delegation_id.startswith("dlg_") and body["delegation_id"] == cmd.delegation_id
    _, again = sending(FAKE, lambda: post({"to": "ana", "until": UNTIL}))
    assert again[0][1].delegation_id != cmd.delegation_id and again[0][1].tools is None  # a new give, all tools


@pytest.mark.parametrize("body", [
    {"to": "ana"},  # no until
    {"until": UNTIL},  # nobody
    {"to": "", "until": UNTIL},
    {"to": "ana", "until": UNTIL, "from": "carl"},  # no one gives in another's name
    {"to": "ana", "until": "next friday"},
    {"to": "ana", "until": "2026-12-04T18:00:00"},  # no time zone
    {"to": "ana", "until": UNTIL, "tools": "submit_order"},
    {"to": "ana", "until": UNTIL, "tools": []},
    {"to": "ana", "until": UNTIL, "tools": [1]},
    {"to": ["ana"], "until": UNTIL},
    {"to": "ana", "until": 1796400000},  # a number is no date here
])
def test_a_malformed_give_is_422_and_sends_nothing(body):
    response, sent = sending(FAKE, lambda: post(body))

    assert response.status_code == 422, response.text
    assert sent == []


def test_only_approvers_and_managers_give_and_the_services_refusals_pass_through():
    requester = token("rita", ("requester",))
    response, sent = sending(FAKE, lambda: post({"to": "ana", "until": UNTIL}, requester))
    assert (response.status_code, response.json()["code"], sent) == (403, "forbidden", [])

    to_self = post({"to": "bob", "until": UNTIL})
    assert (to_self.status_code, to_self.json()["code"]) == (422, "delegation_to_self")


def test_a_revoke_is_204_and_someone_elses_is_404():
    auth = {"Authorization": f"Bearer {token()}"}
    response, sent = sending(FAKE, lambda: CLIENT.delete("/v1/delegations/dlg_mine", headers=auth))
    assert (response.status_code, response.content) == (204, b"")
    assert [(subject, cmd.actor.sub, cmd.delegation_id) for subject, cmd in sent] == [
        (subjects.APPROVAL_CMD_REVOKE_DELEGATION, "bob", "dlg_mine")]

    theirs = CLIENT.delete("/v1/delegations/dlg_theirs", headers=auth)
    assert (theirs.status_code, theirs.json()["code"]) == (404, "not_found")


def test_anyone_signed_in_lists_their_own():
    response = CLIENT.get("/v1/delegations", headers={"Authorization": f"Bearer {token('ana', ('requester',))}"})

    assert response.status_code == 200
    assert [d["delegation_id"] for d in response.json()["items"]] == ["dlg_mine"]
    assert FAKE.queries[-1][1].actor.sub == "ana"
    assert CLIENT.get("/v1/delegations").status_code == 401
