"""Batches on real PostgreSQL and NATS (issue 31 item 3): the prepares and commits in flight together share one
transaction; one that fails in it rolls back alone (the crash after a batch's commit: test_batch_crash.py)."""

from __future__ import annotations

import asyncio

import pytest

from erpilot_contracts import subjects
from erpilot_platform import batch_transaction

pytestmark = pytest.mark.integration


@pytest.fixture
def batches(monkeypatch):
    """What each batch's transaction held at its commit (works committed, works rolled back to a savepoint); its
    first work waits a little, so the messages sent together are in flight together (they join its batch)."""
    seen: list[dict[str, int]] = []
    step, commit = batch_transaction.SharedTransaction.step, batch_transaction.SharedTransaction.commit

    async def slow_step(self, work):
        stats = self.__dict__.setdefault("_stats", {"works": 0, "rolled_back_alone": 0})
        if self._works == 0 and not self.__dict__.get("_waited"):
            self._waited = True
            await asyncio.sleep(0.3)
        try:
            result = await step(self, work)
        except Exception:
            stats["rolled_back_alone"] += self._works > 0
            raise
        stats["works"] += 1
        return result

    async def counted_commit(self):
        seen.append(dict(self.__dict__.get("_stats", {})))
        return await commit(self)

    monkeypatch.setattr(batch_transaction.SharedTransaction, "step", slow_step)
    monkeypatch.setattr(batch_transaction.SharedTransaction, "commit", counted_commit)
    return seen


async def test_one_bad_prepare_in_a_batch_does_not_sink_the_others(erp, session_id, batches):
    skus = [await erp.make_product(on_hand=5) for _ in range(5)]
    cmds = [erp.prepare_cmd("adjust_stock", {"sku": sku, "delta": 1, "reason": "batch"}, session_id=session_id)
            for sku in skus]
    # A second operation for a call already prepared: refused inside its unit of work (``_first_of_its_call``)
    first = await erp.prepare("adjust_stock", {"sku": skus[0], "delta": 2, "reason": "first"}, session_id=session_id)
    bad = erp.prepare_cmd("adjust_stock", {"sku": skus[0], "delta": 3, "reason": "second"}, session_id=session_id)
    bad = bad.model_copy(update={"call_id": first.call_id, "assertion": first.assertion})
    batches.clear()

    async def later(cmd):
        await asyncio.sleep(0.05)  # after the first good one opened the batch: a savepoint of its transaction
        return await erp.send(subjects.ERP_CMD_PREPARE, cmd)

    replies = await asyncio.gather(erp.send(subjects.ERP_CMD_PREPARE, cmds[0]), *(later(c) for c in cmds[1:]),
                                   later(bad))
    assert all(reply.ok for reply in replies[:-1]), replies
    assert not replies[-1].ok and replies[-1].error.code == "invalid_message", replies[-1]
    assert any(batch.get("works", 0) >= 2 and batch.get("rolled_back_alone") for batch in batches), batches
    for cmd in cmds:  # each stored once and its approval asked once, by the outbox after the batch's commit
        assert (await erp.operation_row(cmd.operation_id)).status == "prepared"
        assert len(await erp.approval_requests(cmd.operation_id)) == 1
    assert await erp.operation_row(bad.operation_id) is None and not await erp.approval_requests(bad.operation_id)
