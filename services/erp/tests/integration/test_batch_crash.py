"""A crash after a batch's commit, before its acks (failpoint ``erp.commit.after_db_commit``, issue 31 item 3): every
effect of the batch is there once, and the commands sent again answer the recorded outcomes. A module of its own:
an ERP running in this process (the other integration modules') would take the commands from the crashing one."""

from __future__ import annotations

import asyncio

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.erp.v1 import CommitOperationV1
from erpilot_platform.broker import ServiceUnavailable, request

pytestmark = pytest.mark.integration


async def test_a_crash_after_a_batch_committed_before_its_acks_leaves_each_effect_once(erp_process):
    erp = erp_process.client
    await erp_process.start("erp.commit.after_db_commit=crash")
    session_ids = [f"S-batch-crash-{i}-{asyncio.get_running_loop().time()}" for i in range(4)]
    skus = [await erp.make_product(on_hand=10) for _ in session_ids]
    cmds = [await erp.prepare("adjust_stock", {"sku": sku, "delta": -3, "reason": "batch"}, session_id=session_id)
            for sku, session_id in zip(skus, session_ids, strict=True)]
    grants = [erp.grant(cmd.operation_id, cmd.fingerprint) for cmd in cmds]
    lost = [asyncio.create_task(request(erp.broker, subjects.ERP_CMD_COMMIT,
                                        CommitOperationV1(operation_id=cmd.operation_id, grant=grant),
                                        durable=True, timeout=4))
            for cmd, grant in zip(cmds, grants, strict=True)]
    assert await erp_process.exit_status() == 137
    for task in lost:
        with pytest.raises(ServiceUnavailable):
            await task  # the process died after the commit and before any answer or ack
    committed = [(await erp.operation_row(cmd.operation_id)).status == "committed" for cmd in cmds]
    # the failpoint fires only after the commit of the batch its message was in
    assert any(committed), committed
    assert [await erp.on_hand(sku) for sku in skus] == [7 if done else 10 for done in committed]

    await erp_process.start()
    replies = await asyncio.gather(*(erp.commit(cmd.operation_id, grant)
                                     for cmd, grant in zip(cmds, grants, strict=True)))
    assert all(reply.ok and reply.data["status"] == "committed" for reply in replies), replies
    assert [await erp.on_hand(sku) for sku in skus] == [7, 7, 7, 7]  # each effect once
