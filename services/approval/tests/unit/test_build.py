"""The approval service as ``build`` composes it, on the memory unit of work, a fake ERP and faststream's
in-memory broker: a request, a decision and a read go through the registered endpoints (parsing, error
policy, reply) without PostgreSQL or NATS. Delivery (acks, redelivery) is not what this tests:
``TestNatsBroker`` skips it (PITFALLS); the background loops (relay, sweepers) start only with ``serve``."""

from __future__ import annotations

import os
from dataclasses import asdict
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import TestNatsBroker

from erpilot_approval.app import build
from erpilot_approval.settings import ApprovalSettings
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import Actor, DecideV1, GetApprovalV1, GiveDelegationV1, RequestApprovalV1
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.subjects import COMMANDS_STREAM
from erpilot_platform.grants import encode_public_key, encode_signing_key, verify_grant

from ..fakes import LEDGER_KEY, NOW, FakeErp, MemoryApprovals
from .conftest import ASSERTION_KEY, SIGNING_KEY, build_request, signed, vouched

pytestmark = pytest.mark.unit
FORGER = Ed25519PrivateKey.generate()


async def ask(broker, subject: str, message, *, durable: bool) -> ReplyV1:
    response = await broker.request(message.model_dump(mode="json"), subject,
                                    stream=COMMANDS_STREAM.name if durable else None, timeout=5)
    return ReplyV1.model_validate_json(response.body)


def settings() -> ApprovalSettings:
    return ApprovalSettings(database_url="postgresql://unused/approval",
                            grant_signing_key=encode_signing_key(SIGNING_KEY),
                            assertion_verify_key=encode_public_key(ASSERTION_KEY.public_key()),
                            ledger_verify_key=encode_public_key(LEDGER_KEY.public_key()))


async def test_a_request_and_its_decision_run_through_the_built_endpoints():
    uow = MemoryApprovals(now=NOW)
    app = build(settings(), uow=uow, erp=FakeErp())
    cmd = vouched(build_request("submit_order"))

    async with TestNatsBroker(app.broker) as broker:
        requested = await ask(broker, subjects.APPROVAL_CMD_REQUEST, cmd, durable=True)
        pending_id = requested.data["pending_id"]
        decided = await ask(broker, subjects.APPROVAL_REQ_DECIDE, DecideV1(
            pending_id=pending_id, action="approve", actor=Actor(sub="bob", roles=["approver"]),
            fingerprint=cmd.fingerprint), durable=False)
        read = await ask(broker, subjects.APPROVAL_QUERY_GET, GetApprovalV1(
            pending_id=pending_id, actor=Actor(sub="alice", roles=["requester"])), durable=False)

    assert requested.ok and requested.data["status"] == "pending"
    assert decided.ok and (decided.data["status"], decided.data["decided_by"]) == ("approved", "bob")
    assert read.ok and read.data["status"] == "approved"
    assert verify_grant(uow.state.grants[pending_id], SIGNING_KEY.public_key())  # signed with the settings' key
    assert [e["status"] for e in uow.events(subjects.APPROVAL_EVT_RESOLVED)] == ["approved"]
    assert [e["operation_id"] for e in uow.events(subjects.ERP_CMD_COMMIT)] == [cmd.operation_id]


@pytest.mark.parametrize(("forge", "reason"), [
    (lambda request: RequestApprovalV1(**asdict(request)), "ledger_signature_missing"),  # what a forger can build
    (lambda request: signed(vouched(request), key=FORGER),  # a valid assertion, signed with another key
     "ledger_signature_invalid"),
    (lambda request: signed(RequestApprovalV1(**asdict(request))), "assertion_missing"),  # no one vouched for it
], ids=["unsigned", "not the ledger's key", "unvouched"])
async def test_a_request_the_ledger_did_not_sign_or_the_gateway_did_not_vouch_for_is_invalid_and_stores_nothing(
        forge, reason):
    uow = MemoryApprovals(now=NOW)
    app = build(settings(), uow=uow, erp=FakeErp())
    forged = forge(build_request("submit_order"))

    async with TestNatsBroker(app.broker) as broker:
        reply = await ask(broker, subjects.APPROVAL_CMD_REQUEST, forged, durable=True)

    assert not reply.ok and (reply.error.code, reply.error.status) == ("invalid_message", 422)
    assert reply.error.details == {"reason": reason}
    assert uow.commits == 0 and uow.state.approvals == {}


async def test_a_malformed_command_is_answered_by_the_error_policy():
    uow = MemoryApprovals(now=NOW)
    app = build(settings(), uow=uow, erp=FakeErp())

    async with TestNatsBroker(app.broker) as broker:
        response = await broker.request({"schema_version": 1, "tool": 3}, subjects.APPROVAL_CMD_REQUEST,
                                        stream=COMMANDS_STREAM.name, timeout=5)

    reply = ReplyV1.model_validate_json(response.body)
    assert not reply.ok and reply.error.code == "invalid_message"
    assert uow.commits == 0


async def test_the_built_service_weighs_a_delegation_against_erpilot_role_source(tmp_path):
    roles = tmp_path / "roles.toml"
    roles.write_text('[people.bob]\nroles = ["manager"]\n')
    uow = MemoryApprovals(now=NOW)
    app = build(settings().model_copy(update={"role_source": roles}), uow=uow, erp=FakeErp())
    cmd = vouched(build_request("adjust_stock"))  # managers only
    ana = Actor(sub="ana", roles=["requester"])

    async with TestNatsBroker(app.broker) as broker:
        pending_id = (await ask(broker, subjects.APPROVAL_CMD_REQUEST, cmd, durable=True)).data["pending_id"]
        given = await ask(broker, subjects.APPROVAL_CMD_DELEGATE, GiveDelegationV1(
            delegation_id="dlg_1", to="ana", until=NOW + timedelta(days=3),
            actor=Actor(sub="bob", roles=["manager"])), durable=True)
        roles.write_text('[people.bob]\nroles = ["requester"]\n')  # bob left management after giving it
        os.utime(roles, ns=(1, 1))
        decided = await ask(broker, subjects.APPROVAL_REQ_DECIDE, DecideV1(
            pending_id=pending_id, action="approve", actor=ana, fingerprint=cmd.fingerprint), durable=False)

    assert given.ok
    assert (decided.error.code, decided.error.status) == ("forbidden", 403)
    assert uow.state.approvals[pending_id].status == "pending"
