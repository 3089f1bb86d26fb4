"""Fault test: the ERP process dies inside the prepare transaction (failpoint ``erp.prepare.before_db_commit``:
the operation and its outboxed ``cmd.approval.request`` are written, not committed). Nothing of it remains: no
operation, no request. Restarted, the prepare asked again (and the unacknowledged original, redelivered) stores
the operation once and asks for its approval once."""

from __future__ import annotations

import asyncio
import time

import pytest

from erpilot_contracts import subjects
from erpilot_contracts.subjects import COMMANDS_STREAM
from erpilot_platform.broker import ServiceUnavailable, request
from erpilot_platform.endpoints import ServiceBus

pytestmark = pytest.mark.integration


async def settled(erp, timeout: float = 45.0) -> None:
    """Until the ERP's prepare consumer holds no message (the crashed delivery came back and was acknowledged)."""
    js = erp.broker.config.connection_state.stream
    durable = ServiceBus(None, "erp")._durable_name(subjects.ERP_CMD_PREPARE)  # type: ignore[arg-type]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = await js.consumer_info(COMMANDS_STREAM.name, durable)
        if info.num_pending == 0 and info.num_ack_pending == 0:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"the prepare consumer still holds messages: {info}")


async def test_a_crash_before_the_prepare_commits_leaves_nothing_and_the_retry_asks_for_approval_once(erp_process):
    erp = erp_process.client
    await erp_process.start("erp.prepare.before_db_commit=crash")
    session_id = "S-crash-" + str(time.monotonic_ns())
    sku = await erp.make_product(on_hand=10)
    cmd = erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": -2, "reason": "breakage"}, session_id=session_id)

    lost = asyncio.create_task(request(erp.broker, subjects.ERP_CMD_PREPARE, cmd, durable=True, timeout=4))
    assert await erp_process.exit_status() == 137
    with pytest.raises(ServiceUnavailable):
        await lost
    assert await erp.operation_row(cmd.operation_id) is None  # the transaction rolled back ...
    assert await erp.approval_requests(cmd.operation_id) == []  # ... its outbox row with it: nobody was asked

    await erp_process.start()
    again = await erp.send(subjects.ERP_CMD_PREPARE, cmd)  # the agent asks again (same operation id)
    await settled(erp)

    assert again.ok, again
    row = await erp.operation_row(cmd.operation_id)
    assert row.status == "prepared" and row.fingerprint == cmd.fingerprint
    [asked] = await erp.approval_requests(cmd.operation_id)
    assert asked["requested_by"] == "tester" and asked["fingerprint"] == cmd.fingerprint
    assert await erp.on_hand(sku) == 10
