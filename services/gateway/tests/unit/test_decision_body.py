"""The decision body is strict (SPEC §5): only ``{"action": <one of three exact strings>, "fingerprint":
<string>, "comment"?: <string>}`` reaches the approval service, and only the fingerprint it holds decides.

The gateway runs in-process with its approval service replaced by a fake that records every command and,
like the real one, answers 409 ``stale_fingerprint`` to any other fingerprint.
"""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from erpilot_contracts import subjects
from erpilot_gateway.problems import Problem
from erpilot_platform.testing.previews import preview_json

from .fake_services import RecordingServices, gateway_client, sending

pytestmark = pytest.mark.unit

SECRET = "gateway-test-secret-" + "x" * 32
FINGERPRINT = "sha256:" + "ab" * 32
ACTIONS = ("approve", "reject", "cancel")
STATUS = {"approve": "approved", "reject": "rejected", "cancel": "cancelled"}
PATH = "/v1/approvals/pa_1/decision"


def record(pending_id: str, **changes: Any) -> dict:
    """An approval record as the approval service answers it (``ApprovalRecordV1``)."""
    return {"pending_id": pending_id, "call_id": "call_1", "session_id": "ses_1", "tool": "submit_order",
            "arguments": {"draft_id": "D-1", "revision": 1}, "fingerprint": FINGERPRINT, "operation_id": "op_1",
            "risk": "medium", "preview": preview_json(), "required_roles": ["approver"], "requested_by": "alice",
            "created_at": "2026-10-01T12:00:00Z", "expires_at": "2026-10-01T12:15:00Z", "status": "pending",
            "policy_version": "p1", **changes}


def answer(subject: str, payload: Any) -> dict:
    """Like the real approval service: 409 ``stale_fingerprint`` to any fingerprint but the one it holds."""
    if payload.fingerprint != FINGERPRINT:
        raise Problem(409, "stale_fingerprint", "the fingerprint differs from the approval's")
    if payload.actor.sub == "requester-manager":
        raise Problem(403, "separation_of_duties", "the requester may not approve their own request")
    if subject == subjects.APPROVAL_CMD_EDIT:
        return record("pa_2", supersedes=payload.pending_id, arguments=payload.arguments)
    if subject == subjects.APPROVAL_CMD_DECIDE_MANY:
        return {"action": payload.action,
                "items": [record(item.pending_id, status=STATUS[payload.action]) for item in payload.items]}
    return record(payload.pending_id, status=STATUS[payload.action], comment=payload.comment)


def token(sub: str = "bob", roles: tuple[str, ...] = ("approver",)) -> str:
    return jwt.encode({"sub": sub, "roles": list(roles), "exp": int(time.time()) + 3600}, SECRET, algorithm="HS256")


FAKE = RecordingServices(answer)
CLIENT = gateway_client(FAKE, SECRET)
HEADERS = {"Authorization": f"Bearer {token()}", "Content-Type": "application/json"}


def post(raw: bytes, headers: dict[str, str] | None = None, path: str = PATH):
    return sending(FAKE, lambda: CLIENT.post(path, content=raw, headers=headers or HEADERS))


def well_formed(body: Any) -> bool:
    """The oracle, written independently of the models: is this exactly a decision body?"""
    if type(body) is not dict or not {"action", "fingerprint"} <= body.keys() <= {"action", "fingerprint", "comment"}:
        return False
    if type(body["action"]) is not str or body["action"] not in ACTIONS:
        return False
    if type(body["fingerprint"]) is not str or not 1 <= len(body["fingerprint"]) <= 200:
        return False
    return "comment" not in body or (type(body["comment"]) is str and len(body["comment"]) <= 2000)


def unstorable(value: Any) -> bool:
    """SPEC §9: a NUL character or an integer outside the signed 64-bit range, anywhere (keys included)."""
    if isinstance(value, dict):
        return any(unstorable(k) or unstorable(v) for k, v in value.items())
    if isinstance(value, list):
        return any(unstorable(v) for v in value)
    if isinstance(value, str):
        return "\x00" in value
    return type(value) is int and not -(2**63) <= value < 2**63


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
lookalikes = st.sampled_from([
    *ACTIONS, "Approve", "APPROVE", "approve ", " approve", "approve\n", "approved", "approv", "reject\x00",
    "true", "false", "1", "yes", "", "аpprove",  # the last one starts with a Cyrillic а
])
field_values = lookalikes | st.just(FINGERPRINT) | json_values
bodies = st.one_of(
    st.fixed_dictionaries(  # mostly well-formed, with any of the fields replaced, dropped or added
        {"action": st.sampled_from(ACTIONS) | field_values, "fingerprint": st.just(FINGERPRINT) | field_values},
        optional={"comment": st.text(max_size=20) | field_values, "extra": json_values,
                  "Action": st.sampled_from(ACTIONS), "pending_id": st.text(max_size=5)},
    ),
    st.dictionaries(st.sampled_from(["action", "fingerprint", "comment"]), field_values, max_size=3),
    json_values,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies)
@example({"action": "approve", "fingerprint": FINGERPRINT})
@example({"action": True, "fingerprint": FINGERPRINT})
@example({"action": "false", "fingerprint": FINGERPRINT})
@example({"action": "approve", "fingerprint": FINGERPRINT, "comment": None})
@example({"action": "approve"})
def test_only_an_exact_body_with_the_right_fingerprint_decides(body: Any) -> None:
    response, sent = post(json.dumps(body).encode())
    if unstorable(body) or not well_formed(body):
        assert response.status_code == 422, (body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == ("invalid_arguments" if unstorable(body) else "invalid_body")
        assert sent == []  # refused at the door: the approval service never heard of it
        return
    (subject, cmd), = sent
    assert subject == subjects.APPROVAL_REQ_DECIDE
    assert (cmd.action, cmd.fingerprint, cmd.comment) == (body["action"], body["fingerprint"], body.get("comment"))
    assert (cmd.pending_id, cmd.actor.sub, cmd.actor.roles) == ("pa_1", "bob", ["approver"])
    if body["fingerprint"] == FINGERPRINT:
        assert response.status_code == 200 and response.json()["status"] == STATUS[body["action"]]
    else:
        assert (response.status_code, response.json()["code"]) == (409, "stale_fingerprint")


GOOD = '"action": "approve", "fingerprint": "' + FINGERPRINT + '"'


INVALID_JSON = (400, "invalid_json")  # SPEC §9
INVALID_BODY = (422, "invalid_body")


@pytest.mark.parametrize(("raw", "content_type", "expected"), [
    ('{"action": "reject", ' + GOOD + "}", "application/json", INVALID_JSON),  # duplicate key: which counts?
    ("{" + GOOD + ', "fingerprint": "' + FINGERPRINT + '"}', "application/json", INVALID_JSON),
    ("{" + GOOD + ', "comment": NaN}', "application/json", INVALID_JSON),
    ("{" + GOOD + ', "comment": Infinity}', "application/json", INVALID_JSON),
    ("{" + GOOD + ', "comment": "\\ud800"}', "application/json", INVALID_JSON),  # a lone surrogate
    ("{" + GOOD + ', "comment": ' + "[" * 65 + "]" * 65 + "}", "application/json", INVALID_JSON),
    ("{" + GOOD + ', "comment": ' + "[" * 100_000 + "]" * 100_000 + "}", "application/json", INVALID_JSON),
    ("{" + GOOD + ",}", "application/json", INVALID_JSON),
    ("{" + GOOD + "} trailing", "application/json", INVALID_JSON),
    ("", "application/json", INVALID_JSON),
    ("{" + GOOD + "}", "text/plain", INVALID_BODY),
    ("action=approve&fingerprint=" + FINGERPRINT, "application/x-www-form-urlencoded", INVALID_BODY),
    ("null", "application/json", INVALID_BODY),
    ("[" + "{" + GOOD + "}]", "application/json", INVALID_BODY),
    ('"approve"', "application/json", INVALID_BODY),
    ("{" + GOOD + ', "comment": "a\\u0000b"}', "application/json", (422, "invalid_arguments")),
    ("{" + GOOD + ', "comment": ' + "9" * 5000 + "}", "application/json", (422, "invalid_arguments")),
])
def test_malformed_json_is_refused_before_anything_is_sent(raw: str, content_type: str, expected) -> None:
    response, sent = post(raw.encode(), {**HEADERS, "Content-Type": content_type})
    assert (response.status_code, response.json()["code"], sent) == (*expected, [])
    assert response.headers["content-type"] == "application/problem+json"


def test_invalid_utf8_is_refused() -> None:
    response, sent = post(b'{"action": "approve\xff", "fingerprint": "x"}')
    assert ((response.status_code, response.json()["code"]), sent) == (INVALID_JSON, [])


def test_a_body_is_checked_before_authentication_and_a_charset_is_fine() -> None:
    # Hostile JSON is refused at the edge, before any route (authentication included) runs.
    response, sent = post(b"not json", {"Content-Type": "application/json"})
    assert ((response.status_code, response.json()["code"]), sent) == (INVALID_JSON, [])
    response, sent = post(("{" + GOOD + "}").encode(), {"Content-Type": "application/json"})
    assert (response.status_code, response.json()["code"], sent) == (401, "unauthorized", [])
    ok, sent = post(("{" + GOOD + "}").encode(), {**HEADERS, "Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code == 200 and len(sent) == 1


def test_refusals_of_the_approval_service_are_problem_json() -> None:
    headers = {**HEADERS, "Authorization": f"Bearer {token('requester-manager', ('manager',))}"}
    response, _ = post(("{" + GOOD + "}").encode(), headers)
    assert (response.status_code, response.json()["code"]) == (403, "separation_of_duties")
    assert response.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize("body", [
    {"fingerprint": FINGERPRINT},
    {"fingerprint": FINGERPRINT, "arguments": []},
    {"fingerprint": FINGERPRINT, "arguments": {}, "extra": 1},
    {"fingerprint": 1, "arguments": {}},
    {"arguments": {}},
])
def test_the_edit_body_is_strict_too(body: dict) -> None:
    response, sent = post(json.dumps(body).encode(), path="/v1/approvals/pa_1/edit")
    assert (response.status_code, sent) == (422, [])


def test_an_edit_is_sent_with_its_arguments() -> None:
    body = {"fingerprint": FINGERPRINT, "arguments": {"draft_id": "D-1", "revision": 2}}
    response, sent = post(json.dumps(body).encode(), path="/v1/approvals/pa_1/edit")
    assert response.status_code == 201 and response.json()["supersedes"] == "pa_1"
    (subject, cmd), = sent
    assert (subject, cmd.arguments, cmd.fingerprint) == (subjects.APPROVAL_CMD_EDIT, body["arguments"], FINGERPRINT)


def test_the_openapi_document_shows_the_bodies() -> None:
    schema = CLIENT.get("/openapi.json").json()
    decision = schema["paths"]["/v1/approvals/{pending_id}/decision"]["post"]["requestBody"]
    properties = decision["content"]["application/json"]["schema"]["properties"]
    assert properties["action"]["enum"] == list(ACTIONS)
    assert decision["content"]["application/json"]["schema"]["additionalProperties"] is False
