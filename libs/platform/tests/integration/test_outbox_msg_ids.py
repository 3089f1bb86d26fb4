"""An outbox row cannot be pre-empted: a publisher that foresees its message's name and publishes first under
that name, on another subject of the same stream, does not have it dropped (review of issue 26: the agent could
so suppress an approved ``cmd.erp.commit``). A re-publish of the same row is still dropped."""

from __future__ import annotations

import uuid

import nats
import pytest

from erpilot_contracts import subjects

pytestmark = pytest.mark.integration

# Subjects of the command stream that no service consumes, so no other test's service sees these messages; the
# stream's duplicate window spans all its subjects, as it does for cmd.erp.prepare and cmd.erp.commit.
COMMIT = f"{subjects.PREFIX}.cmd.outbox_test.commit"
OTHER = f"{subjects.PREFIX}.cmd.outbox_test.prepare"


async def _commits_stored(js, operation_id: str) -> int:
    """How many commit messages for ``operation_id`` the command stream holds."""
    info = await js.stream_info(subjects.COMMANDS_STREAM.name, subjects_filter=COMMIT)
    found = 0
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            message = await js.get_msg(subjects.COMMANDS_STREAM.name, seq)
        except nats.js.errors.NotFoundError:
            continue
        found += message.subject == COMMIT and operation_id.encode() in (message.data or b"")
    return found


async def test_a_foreseen_name_published_first_does_not_drop_the_row_and_a_republish_is_still_dropped(
        outbox, broker, nats_url):
    engine, box = outbox
    operation_id = f"op_{uuid.uuid4().hex}"
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        # The pre-emption: a harmless command on the same stream, under the name the commit will carry.
        await js.publish(OTHER, b"{}", headers={"Nats-Msg-Id": f"erp.commit.{operation_id}"})
        async with engine.begin() as conn:
            await box.add(conn, COMMIT, {"operation_id": operation_id},
                          msg_id=f"erp.commit.{operation_id}")
            msg_id = (await conn.execute(box.table.select())).mappings().one()["msg_id"]
        assert msg_id.startswith(f"erp.commit.{operation_id}.")

        assert await box.publish_pending(engine, broker) == 1
        assert await _commits_stored(js, operation_id) == 1

        # The same row published again (a relay that died before its commit): dropped by its stored id.
        ack = await js.publish(COMMIT, f'{{"operation_id": "{operation_id}"}}'.encode(),
                               headers={"Nats-Msg-Id": msg_id})
        assert ack.duplicate
        assert await _commits_stored(js, operation_id) == 1
    finally:
        await nc.close()
