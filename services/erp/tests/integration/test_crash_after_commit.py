"""Fault test: the ERP process dies right after its commit transaction (failpoint
``erp.commit.after_db_commit``), before replying or acking. Restarted, it answers the commit again with
the recorded result, and the effect exists exactly once. The same for a draft (``erp.draft.after_db_commit``),
whose repeat is the sender's retry of a core request."""

from __future__ import annotations

import asyncio
import time

import pytest

from erpilot_contracts import requests as endpoints
from erpilot_contracts import subjects
from erpilot_contracts.erp.v1 import CommitOperationV1
from erpilot_platform.broker import ServiceUnavailable, request, send

pytestmark = pytest.mark.integration


async def test_crash_after_the_commit_transaction_then_restart_answers_the_recorded_result(erp_process):
    erp = erp_process.client
    await erp_process.start("erp.commit.after_db_commit=crash")
    session_id = "S-crash-" + str(time.monotonic_ns())
    sku = await erp.make_product(on_hand=10)
    draft = await erp.new_draft(session_id, await erp.make_customer(), [(sku, 4)])
    cmd = await erp.prepare("submit_order", {"draft_id": draft["draft_id"], "revision": 1}, session_id=session_id)
    grant = erp.grant(cmd.operation_id, cmd.fingerprint)

    lost = asyncio.create_task(request(erp.broker, "erpilot.v1.cmd.erp.commit",
                                       CommitOperationV1(operation_id=cmd.operation_id, grant=grant),
                                       durable=True, timeout=4))
    assert await erp_process.exit_status() == 137
    with pytest.raises(ServiceUnavailable):
        await lost  # no answer ever came: the outcome is unknown to the caller
    row = await erp.operation_row(cmd.operation_id)
    assert row.status == "committed"  # ... but the transaction had committed
    assert await erp.on_hand(sku) == 6 and await erp.orders_of_draft(draft["draft_id"]) == 1

    await erp_process.start()
    status = await erp.operation(cmd.operation_id)
    resent = await erp.commit(cmd.operation_id, grant)

    assert resent.ok and resent.data["status"] == "committed"
    assert resent.data == status.data and resent.data["result"] == row.result
    assert await erp.on_hand(sku) == 6 and await erp.orders_of_draft(draft["draft_id"]) == 1


async def test_a_draft_stored_before_a_crash_is_answered_to_the_senders_retry(erp_process):
    """``req.erp.draft`` is a core request (issue 31): no stream delivers it again after the crash. The ERP stored
    the draft and its answer before it answered, and the agent sends the same request again while unanswered
    (``broker.send``): the restarted ERP answers that retry with the stored draft, and there is one draft."""
    erp = erp_process.client
    await erp_process.start("erp.draft.after_db_commit=crash")
    session_id = "S-crash-" + str(time.monotonic_ns())
    cmd = erp.draft_cmd("create_order_draft", {"customer_id": await erp.make_customer(),
                                               "lines": [{"sku": await erp.make_product(), "qty": 1}]},
                        session_id=session_id)

    # As the agent sends it (Downstream.draft): retried with the same operation_id until an answer comes.
    sent = asyncio.create_task(send(erp.broker, endpoints.ERP_DRAFT, cmd, timeout=45))
    assert await erp_process.exit_status() == 137  # died after its commit, before any answer
    assert not sent.done()
    assert await erp.drafts_of_session(session_id) == 1  # ... the draft had committed
    await erp_process.start()
    answered = await sent

    assert answered.ok and answered.data["outcome"] == "succeeded", answered
    assert await erp.drafts_of_session(session_id) == 1  # the retry made no second draft
    again = await erp.send(subjects.ERP_REQ_DRAFT, cmd)
    assert again == answered  # the stored answer, as any later repeat gets it
