"""``POST /v1/approvals/decisions`` is strict: ``{"action", "items": [{"pending_id", "fingerprint"}] (1-100),
"comment"?}`` or 422 with nothing sent; a refusal from the approval service keeps the failing item's name."""

from __future__ import annotations

import json

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import DecisionsV1
from erpilot_gateway.problems import Problem

from .fake_services import sending
from .test_decision_body import CLIENT, FAKE, FINGERPRINT, HEADERS, record

pytestmark = pytest.mark.unit
PATH = "/v1/approvals/decisions"


def send(body) -> tuple:
    return sending(FAKE, lambda: CLIENT.post(PATH, content=json.dumps(body).encode(), headers=HEADERS))


def item(pending_id: str = "pa_1", fingerprint: str = FINGERPRINT) -> dict:
    return {"pending_id": pending_id, "fingerprint": fingerprint}


@pytest.mark.parametrize("body", [
    {"action": "approve", "items": []},
    {"action": "approve", "items": [item()] * 101},
    {"action": "approve"},
    {"items": [item()]},
    {"action": "Approve", "items": [item()]},
    {"action": "approve", "items": [item()], "extra": 1},
    {"action": "approve", "items": [{**item(), "extra": 1}]},
    {"action": "approve", "items": [{"pending_id": "pa_1"}]},
    {"action": "approve", "items": [item()], "comment": None},
    {"action": "approve", "items": {"pending_id": "pa_1"}},
])
def test_a_malformed_bulk_body_is_422_and_sends_nothing(body) -> None:
    response, sent = send(body)
    assert (response.status_code, response.json()["code"], sent) == (422, "invalid_body", [])


def test_a_bulk_decision_goes_to_the_approval_service_as_one_command(monkeypatch) -> None:
    def answer(subject, payload):
        if any(i.fingerprint != FINGERPRINT for i in payload.items):
            raise Problem(409, "stale_fingerprint", "item 1 (pa_2): stale", pending_id="pa_2", index=1)
        return DecisionsV1(action=payload.action, items=[record(i.pending_id, status="approved")
                                                         for i in payload.items]).model_dump(mode="json")

    monkeypatch.setattr(FAKE, "answer", answer)
    response, sent = send({"action": "approve", "items": [item("pa_1"), item("pa_2")], "comment": "ok"})
    assert response.status_code == 200
    assert [(i["pending_id"], i["status"]) for i in response.json()["items"]] == [("pa_1", "approved"),
                                                                                  ("pa_2", "approved")]
    (subject, cmd), = sent
    assert subject == subjects.APPROVAL_CMD_DECIDE_MANY
    assert (cmd.action, cmd.comment, cmd.actor.sub, [i.pending_id for i in cmd.items]) == (
        "approve", "ok", "bob", ["pa_1", "pa_2"])

    refused, _ = send({"action": "approve", "items": [item("pa_1"), item("pa_2", "sha256:old")]})
    problem = refused.json()
    assert (refused.status_code, problem["code"], problem["pending_id"], problem["index"]) == (
        409, "stale_fingerprint", "pa_2", 1)
