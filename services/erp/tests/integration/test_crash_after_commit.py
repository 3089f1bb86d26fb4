"""Fault test: the ERP process dies right after its commit transaction (failpoint
``erp.commit.after_db_commit``), before replying or acking. Restarted, it answers the commit again with
the recorded result, and the effect exists exactly once."""

from __future__ import annotations

import asyncio
import time

import pytest

from erpilot_contracts.erp.v1 import CommitOperationV1
from erpilot_platform.broker import ServiceUnavailable, request

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
