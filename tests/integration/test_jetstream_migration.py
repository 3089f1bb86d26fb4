"""The JetStream migration (`erpilot migrate`, ``erpilot_platform.jetstream``) on a NATS server of its own:
it declares every stream and consumer, is idempotent, applies a changed consumer setting without losing
a pending message, and a service refuses to start on an unmigrated server."""

from __future__ import annotations

import nats
import pytest
from faststream.nats import NatsBroker

from erpilot.stack import nats_credentials
from erpilot.stack.nats_security import SERVICES, consumers
from erpilot_contracts import subjects
from erpilot_contracts.base import Message
from erpilot_contracts.subjects import ALL_STREAMS, COMMANDS_STREAM
from erpilot_platform import jetstream
from erpilot_platform.embedded import EmbeddedNats
from erpilot_platform.endpoints import ServiceBus
from erpilot_platform.runtime import ServiceApp

pytestmark = pytest.mark.integration


@pytest.fixture
async def js(tmp_path):
    server = EmbeddedNats(tmp_path / "nats")
    url = server.start()
    client = await nats.connect(url)
    try:
        yield client.jetstream(), url
    finally:
        await client.close()
        server.stop()


def one_consumer() -> jetstream.Durable:
    found = consumers("erp")[0]
    return jetstream.Durable(found.stream, found.subject, found.durable)


async def test_migrate_declares_every_stream_and_consumer_once(js):
    context, _ = js
    done = await nats_credentials.migrate_jetstream_on(context)
    durables = nats_credentials.all_durables()
    assert len(done) == len(ALL_STREAMS) + len(durables) and all(d.startswith("created") for d in done)
    assert {d.durable for d in durables} == {c.durable for s in SERVICES for c in consumers(s)}
    assert await nats_credentials.migrate_jetstream_on(context) == []  # idempotent: nothing to change
    for spec in ALL_STREAMS:
        info = await context.stream_info(spec.name)
        assert info.config.metadata[jetstream.VERSION_KEY] == jetstream.JETSTREAM_VERSION
    for durable in durables:
        info = await context.consumer_info(durable.stream, durable.durable)
        assert not jetstream.consumer_differences(
            info.config, jetstream.consumer_config(durable.stream, durable.subject, durable.durable))


async def _pending_after_one_ack(context, durable: jetstream.Durable, count: int) -> list[bytes]:
    """Publish ``count`` messages, take and acknowledge the first: the rest are pending."""
    for i in range(count):
        await context.publish(durable.subject, f"m{i}".encode(), stream=durable.stream)
    sub = await context.pull_subscribe_bind(durable.durable, durable.stream)
    first = (await sub.fetch(1, timeout=5))[0]
    await first.ack_sync()
    await sub.unsubscribe()
    return [f"m{i}".encode() for i in range(1, count)]


async def _drain(context, durable: jetstream.Durable, expected: int) -> list[bytes]:
    sub = await context.pull_subscribe_bind(durable.durable, durable.stream)
    got: list[bytes] = []
    while len(got) < expected:
        for message in await sub.fetch(expected - len(got), timeout=5):
            got.append(message.data)
            await message.ack()
    await sub.unsubscribe()
    return got


async def test_a_changed_consumer_setting_is_updated_in_place_keeping_pending_messages(js, monkeypatch):
    context, _ = js
    durable = one_consumer()
    await jetstream.migrate(context, [durable])
    pending = await _pending_after_one_ack(context, durable, 3)
    monkeypatch.setitem(jetstream.CONSUMER_OVERRIDES, durable.durable, {"ack_wait": 42.0, "max_deliver": 7})
    done = await jetstream.migrate(context, [durable])
    assert done == [f"updated consumer {durable.stream}/{durable.durable}"]
    info = await context.consumer_info(durable.stream, durable.durable)
    assert (info.config.ack_wait, info.config.max_deliver) == (42.0, 7)
    assert await _drain(context, durable, len(pending)) == pending


async def test_a_setting_nats_cannot_update_recreates_the_consumer_from_its_ack_floor(js, monkeypatch):
    context, _ = js
    durable = one_consumer()
    await jetstream.migrate(context, [durable])
    pending = await _pending_after_one_ack(context, durable, 4)
    monkeypatch.setitem(jetstream.CONSUMER_OVERRIDES, durable.durable, {"mem_storage": True})
    done = await jetstream.migrate(context, [durable])
    assert done == [f"recreated consumer {durable.stream}/{durable.durable} from stream sequence 2"]
    assert (await context.consumer_info(durable.stream, durable.durable)).config.mem_storage
    assert await _drain(context, durable, len(pending)) == pending
    assert await jetstream.migrate(context, [durable]) == []  # the recreated consumer counts as migrated


def _service_app(url: str) -> ServiceApp:
    broker = NatsBroker(url)
    bus = ServiceBus(broker, "erp")

    @bus.command(subjects.ERP_CMD_COMMIT, Message)
    async def commit(_: Message) -> None:
        return None

    return ServiceApp("erp", broker)


async def test_a_service_refuses_to_start_before_migrate_and_creates_nothing(js):
    context, url = js
    app = _service_app(url)
    with pytest.raises(jetstream.JetStreamNotReady, match="run `erpilot migrate`") as refused:
        await app.start()
    await app.broker.stop()
    assert f"stream {COMMANDS_STREAM.name} does not exist" in str(refused.value)
    with pytest.raises(nats.js.errors.NotFoundError):
        await context.stream_info(COMMANDS_STREAM.name)  # the service created nothing


async def test_a_service_refuses_a_consumer_with_other_settings_and_starts_once_migrated(js, monkeypatch):
    context, url = js
    durable = next(d for d in nats_credentials.all_durables() if d.subject == subjects.ERP_CMD_COMMIT)
    monkeypatch.setitem(jetstream.CONSUMER_OVERRIDES, durable.durable, {"ack_wait": 99.0})
    await nats_credentials.migrate_jetstream_on(context)
    monkeypatch.delitem(jetstream.CONSUMER_OVERRIDES, durable.durable)
    app = _service_app(url)
    with pytest.raises(jetstream.JetStreamNotReady, match=rf"{durable.durable}: ack_wait 99.0 \(expected 15.0\)"):
        await app.start()
    await app.broker.stop()
    await nats_credentials.migrate_jetstream_on(context)
    app = _service_app(url)
    await app.start()
    await app.stop()


async def test_a_service_refuses_streams_with_another_replica_count(js, monkeypatch):
    context, url = js
    await nats_credentials.migrate_jetstream_on(context)
    monkeypatch.setenv("ERPILOT_NATS_REPLICAS", "3")
    app = _service_app(url)
    with pytest.raises(jetstream.JetStreamNotReady, match=r"num_replicas 1 \(expected 3\)"):
        await app.start()
    await app.broker.stop()


def test_the_replica_setting_is_checked():
    assert jetstream.replicas_from_env({}) == 1
    assert jetstream.replicas_from_env({"ERPILOT_NATS_REPLICAS": "3"}) == 3
    for bad in ("0", "x", "-1", "9"):
        with pytest.raises(ValueError, match="ERPILOT_NATS_REPLICAS"):
            jetstream.replicas_from_env({"ERPILOT_NATS_REPLICAS": bad})


async def test_the_retired_session_stream_is_deleted_by_migrate_and_a_service_refuses_to_start_beside_it(js):
    """Issue 31: session events are stored by the agent and published on core NATS; the stream an older version
    declared on their subjects would go on storing every publish, so the migration deletes it."""
    context, url = js
    await nats_credentials.migrate_jetstream_on(context)
    await context.add_stream(name="ERPILOT_SESSIONS", subjects=[subjects.SESSION_EVENTS_ALL])  # an old deployment
    app = _service_app(url)
    with pytest.raises(jetstream.JetStreamNotReady, match="stream ERPILOT_SESSIONS is retired and still exists"):
        await app.start()
    await app.broker.stop()

    assert await nats_credentials.migrate_jetstream_on(context) == ["deleted retired stream ERPILOT_SESSIONS"]
    with pytest.raises(nats.js.errors.NotFoundError):
        await context.stream_info("ERPILOT_SESSIONS")
    app = _service_app(url)
    await app.start()
    await app.stop()


async def test_the_retired_command_consumers_are_deleted_by_migrate_keeping_the_others(js):
    """Issue 31: the tool call, the decision and the draft became core requests (``req.agent.tool_call``,
    ``req.approval.decide``, ``req.erp.draft``); the durable consumers an older version declared on their ``cmd.*``
    subjects read nothing any more, so the migration deletes them, once."""
    context, _ = js
    await nats_credentials.migrate_jetstream_on(context)
    old = {"agent": f"{subjects.PREFIX}.cmd.agent.tool_call", "approval": f"{subjects.PREFIX}.cmd.approval.decide",
           "erp": f"{subjects.PREFIX}.cmd.erp.draft"}
    expected = [(COMMANDS_STREAM.name, ServiceBus(None, service)._durable_name(subject))  # type: ignore[arg-type]
                for service, subject in old.items()]
    assert list(subjects.RETIRED_CONSUMERS) == expected
    for (stream, retired), subject in zip(expected, old.values(), strict=True):  # an old deployment's
        await context.add_consumer(stream, jetstream.consumer_config(stream, subject, retired))

    assert await nats_credentials.migrate_jetstream_on(context) == [
        f"deleted retired consumer {stream}/{retired}" for stream, retired in expected]
    for stream, retired in expected:
        with pytest.raises(nats.js.errors.NotFoundError):
            await context.consumer_info(stream, retired)
    assert await nats_credentials.migrate_jetstream_on(context) == []
    # their other consumers are as they were
    for consumer in (*consumers("agent"), *consumers("approval"), *consumers("erp")):
        await context.consumer_info(consumer.stream, consumer.durable)
