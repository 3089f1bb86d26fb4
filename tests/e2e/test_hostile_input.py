"""Bad input anywhere gets a clear 4xx problem document and changes nothing (SPEC §8, §9).

A stack of its own (no other test's leftovers can change a table meanwhile) receives:
- a property-based fuzz run (schemathesis) over the gateway's own OpenAPI document, positive and
  negative data: zero 5xx, every 4xx a problem document, every 2xx body matching its schema, and no
  table changed by a refused request;
- every hostile body of ``hostile.py`` on every POST/PATCH route of that document, hostile values in
  well-formed bodies and hostile URLs;
- hostile messages sent straight on NATS to every command and query subject: each answered at once
  with a clear error (never retried), dead-lettered, and nothing stored.
"""

from __future__ import annotations

import json
import zlib

import httpx
import pytest
import schemathesis
from faststream.nats import NatsBroker
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from erpilot_contracts import subjects
from erpilot_contracts.subjects import DEAD_LETTER_STREAM, dead_letter_subject
from erpilot_contracts.tools.v1 import TOOLS
from erpilot_gateway.app import create_app
from erpilot_gateway.settings import GatewaySettings
from erpilot_platform.grants import new_keypair_env
from tests.e2e.conftest import SECRET, isolated_stack, token
from tests.e2e.hostile import (
    HOSTILE_JSON,
    HOSTILE_URLS,
    HOSTILE_VALUES,
    INVALID_ARGUMENTS,
    INVALID_JSON,
    Snapshots,
    encode,
    fill,
)

pytestmark = pytest.mark.e2e

OPENAPI = create_app(GatewaySettings(auth_secret=SECRET, assertion_signing_key=new_keypair_env(
    "ERPILOT_ASSERTION")["ERPILOT_ASSERTION_SIGNING_KEY"]), broker=object()).openapi()
ALL_ROLES = ("requester", "approver", "manager", "admin")
SCHEMA = schemathesis.openapi.from_dict(OPENAPI)
SCHEMA.config.generation.update(modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE],
                                allow_x00=True, database="none")


@pytest.fixture(scope="module")
def guarded(database_url, tmp_path_factory):
    with isolated_stack(database_url, tmp_path_factory.mktemp("hostile"), {}) as running:
        yield running


@pytest.fixture(scope="module")
def snapshots(guarded):
    taker = Snapshots(guarded.database_url)
    yield taker
    taker.close()


@pytest.fixture(scope="module")
def client(guarded):
    headers = {"Authorization": f"Bearer {token('fuzzer', *ALL_ROLES)}"}
    with httpx.Client(base_url=guarded.base_url, headers=headers, timeout=30) as http:
        yield http


@pytest.fixture(scope="module")
def ids(client) -> dict[str, str]:
    """A real session and a real pending approval, so hostile bodies reach routes that would act."""
    session_id = client.post("/v1/sessions", json={}).json()["session_id"]
    pending = client.post(f"/v1/sessions/{session_id}/tool-calls", json={
        "tool": "adjust_stock", "arguments": {"sku": "SKU-PAPER-A4", "delta": 1, "reason": "hostile input test"}})
    assert pending.status_code == 202, pending.text
    return {"sid": session_id, "pid": pending.json()["pending_id"], "fp": pending.json()["fingerprint"]}


def assert_problem(response: httpx.Response, expected: tuple[int, str] | None, context: object = None) -> None:
    assert 400 <= response.status_code < 500, (context, response.status_code, response.text[:300])
    assert response.headers["content-type"] == "application/problem+json", response.headers
    body = response.json()
    assert isinstance(body.get("code"), str) and body["status"] == response.status_code, body
    if expected is not None:
        assert (response.status_code, body["code"]) == expected, (context, body)


def body_routes() -> list[tuple[str, str]]:
    return [(method.upper(), path) for path, item in OPENAPI["paths"].items() for method in item
            if method in ("post", "patch", "put")]


def test_every_body_route_refuses_hostile_json_and_nothing_changes(client, ids, snapshots):
    routes = body_routes()
    assert {("POST", "/v1/sessions/{session_id}/tool-calls"), ("POST", "/v1/approvals/{pending_id}/decision"),
            ("PATCH", "/v1/erp/products/{sku}")} <= set(routes)
    real = {"session_id": ids["sid"], "pending_id": ids["pid"], "sku": "SKU-PAPER-A4"}
    before = snapshots.settled()
    for method, template in routes:
        path = template.format_map({k: real.get(k, "unknown-id") for k in _placeholders(template)})
        for name, raw, expected in HOSTILE_JSON:
            response = client.request(method, path, content=raw, headers={"Content-Type": "application/json"})
            assert_problem(response, expected, (method, path, name))
        # No content type is read as JSON too (as FastAPI would); another one is never parsed as JSON.
        assert_problem(client.request(method, path, content=HOSTILE_JSON[0][1]), INVALID_JSON)
    for method, template, body, expected in HOSTILE_VALUES:
        response = client.request(method, fill(template, ids), content=encode(fill(body, ids)),
                                  headers={"Content-Type": "application/json"})
        assert_problem(response, expected, (method, template, body))
    assert snapshots.take() == before


def _placeholders(template: str) -> list[str]:
    return [part[1:-1] for part in template.split("/") if part.startswith("{")]


def test_hostile_urls_are_refused_and_nothing_changes(client, snapshots):
    before = snapshots.settled()
    for url in HOSTILE_URLS:
        response = client.get(url)
        assert_problem(response, INVALID_ARGUMENTS if "%00" in url else None, url)
    assert snapshots.take() == before


def test_a_body_over_1_mib_is_refused_before_authentication(guarded):
    raw = b'{"text": "' + b"x" * (1024 * 1024) + b'"}'
    response = httpx.post(f"{guarded.base_url}/v1/sessions", content=raw, timeout=30,
                          headers={"Content-Type": "application/json"})  # no token at all
    assert_problem(response, (413, "payload_too_large"))

    def chunks():  # no Content-Length: the gateway stops reading at the limit
        for _ in range(40):
            yield b"x" * 65536

    response = httpx.post(f"{guarded.base_url}/v1/sessions", content=chunks(), timeout=30)
    assert_problem(response, (413, "payload_too_large"))


# Messages a compromised or buggy peer could send straight on NATS: broken JSON, then well-shaped
# messages with a value that cannot be stored or fingerprinted.
RAW_MESSAGES = [
    b'{"session_id": "ses_h", "session_id": "ses_i", "owner": "o"}',
    b'{"session_id": "\\ud800", "owner": "o"}',
    b"[" * 100_000 + b"]" * 100_000,
    b'{"session_id": "ses_h", "owner": "o", "title": "\\u0000", "text": "\\u0000", "comment": "\\u0000"}',
    b'{"session_id": "ses_h", "owner": "o", "price_minor": 9223372036854775808, "limit": 1e400}',
]
SHAPED = {
    subjects.AGENT_REQ_TOOL_CALL: {"session_id": "ses_h", "owner": "o", "tool": "refund_payment",
                                   "arguments": {"order_id": "O-1", "amount_minor": 2**60, "currency": "EUR",
                                                 "channel": "original"}},
    subjects.APPROVAL_CMD_EDIT: {"pending_id": "pa_h", "fingerprint": "sha256:x", "arguments": {"delta": 2**60},
                                 "actor": {"sub": "m", "roles": ["manager"]}},
    subjects.ERP_CMD_UPDATE_PRODUCT: {"sku": "SKU-PAPER-A4", "price_minor": 2**63, "updated_by": "x",
                                      "request_id": "r-h"},
}
COMMANDS = [subjects.AGENT_CMD_CREATE_SESSION, subjects.AGENT_CMD_POST_MESSAGE,
            subjects.APPROVAL_CMD_REQUEST, subjects.APPROVAL_CMD_EDIT,
            subjects.ERP_CMD_PREPARE, subjects.ERP_CMD_COMMIT, subjects.ERP_CMD_UPDATE_PRODUCT]
# Core requests (retried commands and queries): answered invalid_message; nothing stored them, nothing to dead-letter.
QUERIES = [subjects.AGENT_REQ_TOOL_CALL, subjects.APPROVAL_REQ_DECIDE, subjects.ERP_REQ_DRAFT,
           subjects.AGENT_QUERY_SESSION, subjects.AGENT_QUERY_TOOL_CALL, subjects.APPROVAL_QUERY_POLICY,
           subjects.APPROVAL_QUERY_GET, subjects.APPROVAL_QUERY_LIST, subjects.ERP_QUERY_READ,
           subjects.ERP_QUERY_OPERATION, subjects.ERP_QUERY_VIEW]


async def test_hostile_messages_on_nats_are_answered_dead_lettered_and_never_stored(guarded, snapshots):
    before = snapshots.settled()
    broker = NatsBroker(guarded.nats_url)
    await broker.connect()
    try:
        js = broker.config.connection_state.stream
        for subject in COMMANDS + QUERIES:
            durable = subject in COMMANDS
            shaped = [json.dumps(SHAPED[subject]).encode()] if subject in SHAPED else []
            for raw in RAW_MESSAGES + shaped:
                reply = await broker.request(raw, subject, stream="ERPILOT_COMMANDS" if durable else None,
                                             timeout=30)
                answer = json.loads(reply.body)
                error = answer["error"]
                assert answer["ok"] is False and (error["code"], error["status"]) == ("invalid_message", 422), (
                    subject, raw[:80], answer)
                if raw in RAW_MESSAGES:  # refused by the strict reader, before the contract model
                    assert error["details"]["reason"] in ("invalid_json", "invalid_arguments"), answer
                # Refused at once: a retried message would end in internal_error, not invalid_message.
                if durable:
                    service = subject.split(".")[3]
                    dead = await js.get_last_msg(DEAD_LETTER_STREAM.name, dead_letter_subject(service, subject))
                    reason = str((dead.headers or {}).get("Erpilot-Reason", ""))
                    assert dead.data == raw and reason.startswith("invalid message"), (subject, dead.headers)
    finally:
        await broker.stop()
    assert snapshots.take() == before


@pytest.fixture(scope="module")
def fuzz_state(guarded, ids, snapshots):
    return {"base_url": guarded.base_url, "snapshots": snapshots, "ids": ids,
            "headers": {"Authorization": f"Bearer {token('fuzzer', *ALL_ROLES)}"}}


def aim(case, ids: dict[str, str]) -> None:
    """Point half the cases at a real session, pending approval, product and tool, so the fuzzed values
    reach the services' own checks rather than a 404. Messages stay on unknown sessions: a run started
    there would keep writing while later cases are measured."""
    pick = zlib.crc32(repr((case.path_parameters, case.query, case.body)).encode())
    if pick % 2 or case.path.endswith("/messages"):
        return
    real = {"session_id": ids["sid"], "pending_id": ids["pid"], "sku": "SKU-PAPER-A4"}
    for name in case.path_parameters or {}:
        if name in real:
            case.path_parameters[name] = real[name]
    if case.path.endswith("/tool-calls") and isinstance(case.body, dict) and "tool" in case.body:
        case.body["tool"] = sorted(TOOLS)[pick % len(TOOLS)]


def _business(digests: dict[str, str]) -> dict[str, str]:
    """Without the inbox: a business refusal (404, 409) is recorded there so a redelivery gets the same answer."""
    return {name: digest for name, digest in digests.items() if not name.endswith(".inbox")}


@SCHEMA.exclude(path_regex="/events$").parametrize()
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_fuzzing_the_openapi_document_finds_no_5xx_and_refusals_change_nothing(case, fuzz_state):
    aim(case, fuzz_state["ids"])
    writes = case.method.upper() != "GET"
    before = fuzz_state["snapshots"].settled() if writes else None
    response = case.call(base_url=fuzz_state["base_url"], headers=fuzz_state["headers"], timeout=30)
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
    if 400 <= response.status_code < 500:
        assert response.headers["content-type"] == ["application/problem+json"], response.text[:300]
        assert isinstance(response.json().get("code"), str), response.text[:300]
        if writes:
            after = fuzz_state["snapshots"].take()
            refused_at_the_edge = response.status_code in (400, 401, 405, 413, 415, 422)
            assert (after if refused_at_the_edge else _business(after)) == (
                before if refused_at_the_edge else _business(before)), (case.method, case.path, response.text[:300])
