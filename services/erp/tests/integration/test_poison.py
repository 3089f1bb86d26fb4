"""A malformed message on any ERP subject is answered `invalid_message` and never blocks the consumer; a stored
command's is dead-lettered too, a core request's (the draft, issue 31) only answered: nothing stored it."""

from __future__ import annotations

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.subjects import DEAD_LETTER_STREAM, dead_letter_subject

pytestmark = pytest.mark.integration

COMMANDS = [subjects.ERP_CMD_PREPARE, subjects.ERP_CMD_COMMIT, subjects.ERP_CMD_UPDATE_PRODUCT]
QUERIES = [subjects.ERP_QUERY_READ, subjects.ERP_QUERY_OPERATION, subjects.ERP_QUERY_VIEW]
POISON = [b"{not json", b'{"unexpected": "shape"}', b"[]", b'{"operation_id": 42, "grant": "no"}']


async def a_valid_command(erp, subject, session_id):
    if subject == subjects.ERP_REQ_DRAFT:
        return await erp.draft("create_order_draft", {"customer_id": await erp.make_customer(),
                                                      "lines": [{"sku": await erp.make_product(), "qty": 1}]},
                               session_id=session_id)
    if subject == subjects.ERP_CMD_PREPARE:
        return await erp.send(subject, erp.prepare_cmd("adjust_stock", {"sku": await erp.make_product(), "delta": 1,
                                                                        "reason": "x"}, session_id=session_id))
    if subject == subjects.ERP_CMD_COMMIT:
        cmd = await erp.prepare("adjust_stock", {"sku": await erp.make_product(), "delta": 1, "reason": "x"},
                                session_id=session_id)
        return await erp.approve_and_commit(cmd)
    return await erp.update_product(await erp.make_product(), price_minor=1)


@pytest.mark.parametrize("subject", COMMANDS)
async def test_poison_commands_are_answered_dead_lettered_and_the_consumer_goes_on(erp, session_id, subject):
    for body in POISON:
        reply = await erp.send_raw(subject, body)
        assert not reply.ok and reply.error.code == "invalid_message" and reply.error.status == 422, body

    js = erp.broker.config.connection_state.stream
    last = await js.get_last_msg(DEAD_LETTER_STREAM.name, dead_letter_subject("erp", subject))
    assert last.data == POISON[-1]
    reply = await a_valid_command(erp, subject, session_id)
    assert reply.ok, reply


async def test_a_poison_draft_is_answered_not_dead_lettered_and_the_next_draft_runs(erp, session_id):
    js = erp.broker.config.connection_state.stream
    before = (await js.stream_info(DEAD_LETTER_STREAM.name)).state.messages
    for body in POISON:
        reply = await erp.send_raw(subjects.ERP_REQ_DRAFT, body)
        assert not reply.ok and reply.error.code == "invalid_message" and reply.error.status == 422, body
    assert (await js.stream_info(DEAD_LETTER_STREAM.name)).state.messages == before
    reply = await a_valid_command(erp, subjects.ERP_REQ_DRAFT, session_id)
    assert reply.ok, reply


@pytest.mark.parametrize("subject", QUERIES)
async def test_poison_queries_are_answered(erp, subject):
    for body in POISON:
        reply = await erp.send_raw(subject, body, durable=False)
        assert not reply.ok and reply.error.code == "invalid_message", body
    assert (await erp.view("product", id="SKU-PEN-BLUE")).ok
