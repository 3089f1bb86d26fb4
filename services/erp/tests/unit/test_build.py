"""The ERP as ``build`` composes it, on the in-memory ledger and faststream's in-memory broker: commands and
queries go through the registered endpoints (parsing, error policy, typed reply) without PostgreSQL or NATS.
Delivery (acks, redelivery) is not what this tests: ``TestNatsBroker`` skips it (PITFALLS)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from faststream.nats import TestNatsBroker

from erpilot_contracts import subjects
from erpilot_contracts.base import ReplyV1
from erpilot_contracts.erp.v1 import ExecuteToolV1
from erpilot_contracts.subjects import COMMANDS_STREAM
from erpilot_erp.app import build
from erpilot_erp.settings import ErpSettings
from erpilot_platform.grants import encode_public_key, encode_signing_key

pytestmark = pytest.mark.unit


async def ask(broker, subject: str, message, *, durable: bool) -> ReplyV1:
    response = await broker.request(message.model_dump(mode="json"), subject,
                                    stream=COMMANDS_STREAM.name if durable else None, timeout=5)
    return ReplyV1.model_validate_json(response.body)


def real_time_assertion(desk) -> str:
    """The built app reads the real clock, not the desk's."""
    return desk.assertion(issued=datetime.now(UTC))


def built(desk):
    settings = ErpSettings(database_url="postgresql://unused/erp",
                           grant_verify_key=encode_public_key(desk.key.public_key()),
                           assertion_verify_key=encode_public_key(desk.assertion_key.public_key()),
                           ledger_signing_key=encode_signing_key(desk.ledger_key))
    return build(settings, ledger=desk.ledger)


async def test_a_draft_command_and_a_read_query_run_through_the_built_endpoints(desk):
    app = built(desk)
    cmd = desk.draft_cmd("create_order_draft", {"customer_id": "C-1", "lines": [{"sku": "SKU-A", "qty": 2}]},
                         assertion=real_time_assertion(desk))

    async with TestNatsBroker(app.broker) as broker:
        drafted = await ask(broker, subjects.ERP_REQ_DRAFT, cmd, durable=False)
        draft_id = drafted.data["result"]["draft_id"]
        read = await ask(broker, subjects.ERP_QUERY_READ, ExecuteToolV1(
            session_id=cmd.session_id, call_id="run-desk:call-read", tool="get_product", requested_by="tester",
            operation_id="op-read", arguments={"sku": "SKU-A"}, assertion=real_time_assertion(desk)), durable=False)

    assert drafted.ok and drafted.data["outcome"] == "succeeded"
    assert desk.ledger.state.drafts[draft_id].latest_revision == 1  # stored in the substitute ledger
    assert read.ok and read.data["result"]["sku"] == "SKU-A"


async def test_a_refusal_and_a_message_without_a_valid_assertion_are_answered_by_the_error_policy(desk):
    app = built(desk)
    not_a_draft = desk.draft_cmd("submit_order", {"draft_id": "D-1", "revision": 1})
    unvouched = desk.draft_cmd("create_order_draft", {"customer_id": "C-1", "lines": [{"sku": "SKU-A", "qty": 1}]},
                               assertion=None)

    async with TestNatsBroker(app.broker) as broker:
        malformed = await broker.request({"schema_version": 1, "tool": 3}, subjects.ERP_REQ_DRAFT, timeout=5)
        refused = await ask(broker, subjects.ERP_REQ_DRAFT, not_a_draft, durable=False)
        invalid = await ask(broker, subjects.ERP_REQ_DRAFT, unvouched, durable=False)

    reply = ReplyV1.model_validate_json(malformed.body)
    assert not reply.ok and reply.error.code == "invalid_message"
    assert (refused.error.code, refused.error.status) == ("not_a_draft_tool", 422)
    assert (invalid.error.code, invalid.error.details) == ("invalid_message", {"reason": "assertion_missing"})
    assert desk.ledger.state.drafts == {}
