"""The JetStream "schema": every stream and durable consumer Erpilot needs, declared by `erpilot migrate`.

Like the database, JetStream has a versioned migration. ``erpilot migrate`` (as the NATS admin) creates or
updates every stream of ``erpilot_contracts.subjects.ALL_STREAMS`` (``ERPILOT_NATS_REPLICAS`` replicas,
file storage), deletes those of ``RETIRED_STREAMS`` (ERPILOT_SESSIONS: session events are the agent's store's
and core NATS's now; its stored copies are read by nobody) and the durable consumers of ``RETIRED_CONSUMERS``
(a command that became a core request), and creates or updates every durable consumer,
with the settings of ``consumer_config`` — the one table of consumer settings, which ``ServiceBus`` also
subscribes with. Services never create a stream or a consumer: ``verify`` at start-up checks that what they
need exists with the expected settings (and no retired stream is left) and stops them with a message naming
what is missing ("run `erpilot migrate`").

A changed consumer setting is applied in place where NATS allows it (ack wait, max deliver, max ack
pending, backoff, ...); where it does not (ack policy, storage, ...), the consumer is recreated starting at
the old consumer's ack floor, so no pending message is lost (a message acknowledged above the floor may
be delivered once more: every consumer is idempotent).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import nats.js.errors
from nats.js.api import ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from erpilot_contracts.subjects import ALL_STREAMS, RETIRED_CONSUMERS, RETIRED_STREAMS, StreamSpec
from erpilot_platform.retries import RetryPolicy

# Bump when a stream or consumer setting below changes: services refuse objects of another version.
JETSTREAM_VERSION = "2"  # 2: max_deliver from the retry budget
VERSION_KEY = "erpilot_jetstream_version"
DUPLICATE_WINDOW_SECONDS = 120.0
# A message not acknowledged within this time is redelivered (e.g. its consumer crashed). Handlers
# that take longer keep their message with an in-progress heartbeat, so a short wait is safe.
ACK_WAIT_SECONDS = 15.0

# The settings of every durable consumer: defaults, then per-stream and per-durable overrides.
CONSUMER_DEFAULTS: dict[str, object] = {"ack_wait": ACK_WAIT_SECONDS, "max_ack_pending": 1000}
CONSUMER_OVERRIDES: dict[str, dict[str, object]] = {}  # keyed by stream name or durable name
# The settings compared by ``verify`` and ``migrate`` (the server fills in the others).
COMPARED = ("filter_subject", "ack_policy", "ack_wait", "max_deliver", "max_ack_pending", "backoff",
            "mem_storage", "num_replicas")


CONSUMER_CREATE_ERROR = 10012  # JSConsumerCreateErrF: how the server refuses an update it cannot apply


class JetStreamNotReady(RuntimeError):
    """A stream or consumer a service needs is missing or has other settings: run `erpilot migrate`."""


@dataclass(frozen=True)
class Durable:
    """One durable consumer: who reads which subject from which stream."""

    stream: str
    subject: str
    durable: str


def replicas_from_env(environ: os._Environ | dict = os.environ) -> int:
    """``ERPILOT_NATS_REPLICAS`` (default 1): how many copies of every stream a cluster keeps."""
    raw = environ.get("ERPILOT_NATS_REPLICAS", "1") or "1"
    if not raw.strip().isdigit() or not 1 <= int(raw) <= 5:
        raise ValueError(f"ERPILOT_NATS_REPLICAS must be a number from 1 to 5, got {raw!r}")
    return int(raw)


def stream_config(spec: StreamSpec, replicas: int) -> StreamConfig:
    return StreamConfig(
        name=spec.name, subjects=list(spec.subjects), description=spec.description,
        max_age=float(spec.max_age_seconds), storage=StorageType.FILE, duplicate_window=DUPLICATE_WINDOW_SECONDS,
        num_replicas=replicas, metadata={VERSION_KEY: JETSTREAM_VERSION},
    )


def deployment_consumer_settings(environ: Mapping[str, str] | None = None) -> dict[str, object]:
    """The consumer settings a deployment configures (``ERPILOT_ACK_WAIT_SECONDS``, ``ERPILOT_DELIVERY_MAX_ATTEMPTS``).

    ``erpilot migrate`` declares them from its environment and every service subscribes with the same
    variables (``PlatformSettings``), so what migrate declared is what each service verifies.
    """
    env = os.environ if environ is None else environ
    attempts = int(env.get("ERPILOT_DELIVERY_MAX_ATTEMPTS") or RetryPolicy.max_attempts)
    return {"ack_wait": float(env.get("ERPILOT_ACK_WAIT_SECONDS") or ACK_WAIT_SECONDS),
            "max_deliver": RetryPolicy(max_attempts=attempts).max_deliver}


def consumer_config(stream: str, subject: str, durable: str, **deployment: object) -> ConsumerConfig:
    """The settings of one durable consumer (``ServiceBus`` subscribes with them, ``migrate`` declares them).

    ``deployment`` holds ``ack_wait`` / ``max_deliver`` as configured; unset, they come from the environment.
    """
    settings = {**CONSUMER_DEFAULTS, **(deployment or deployment_consumer_settings()),
                **CONSUMER_OVERRIDES.get(stream, {}), **CONSUMER_OVERRIDES.get(durable, {})}
    return ConsumerConfig(name=durable, durable_name=durable, filter_subject=subject,
                          metadata={VERSION_KEY: JETSTREAM_VERSION}, **settings)


def consumer_differences(have: ConsumerConfig, want: ConsumerConfig) -> list[str]:
    """The compared settings whose values differ (a field ``want`` leaves unset is the server's default)."""
    found = []
    for name in COMPARED:
        wanted = getattr(want, name)
        if wanted is not None and getattr(have, name) != wanted:
            found.append(f"{name} {getattr(have, name)!r} (expected {wanted!r})")
    if (have.metadata or {}).get(VERSION_KEY) != JETSTREAM_VERSION:
        found.append(f"version {(have.metadata or {}).get(VERSION_KEY)!r} (expected {JETSTREAM_VERSION!r})")
    return found


def stream_differences(have: StreamConfig, want: StreamConfig) -> list[str]:
    found = []
    for name in ("subjects", "storage", "num_replicas", "max_age", "duplicate_window"):
        if getattr(have, name) != getattr(want, name):
            found.append(f"{name} {getattr(have, name)!r} (expected {getattr(want, name)!r})")
    if (have.metadata or {}).get(VERSION_KEY) != JETSTREAM_VERSION:
        found.append(f"version {(have.metadata or {}).get(VERSION_KEY)!r} (expected {JETSTREAM_VERSION!r})")
    return found


async def migrate(js, durables: Iterable[Durable], *, replicas: int = 1,
                  consumer_settings: Mapping[str, object] | None = None) -> list[str]:
    """Create or update every stream and durable consumer; returns what it did (idempotent)."""
    done: list[str] = []
    for spec in ALL_STREAMS:
        want = stream_config(spec, replicas)
        try:
            info = await js.stream_info(spec.name)
        except NotFoundError:
            try:
                await js.add_stream(want)
                done.append(f"created stream {spec.name}")
                continue
            except nats.js.errors.BadRequestError:  # another migrator created it meanwhile
                info = await js.stream_info(spec.name)
        if stream_differences(info.config, want):
            await js.update_stream(want)
            done.append(f"updated stream {spec.name}")
    for name in RETIRED_STREAMS:
        try:
            await js.delete_stream(name)
            done.append(f"deleted retired stream {name}")
        except NotFoundError:
            pass
    for stream, durable_name in RETIRED_CONSUMERS:
        try:
            await js.delete_consumer(stream, durable_name)
            done.append(f"deleted retired consumer {stream}/{durable_name}")
        except NotFoundError:
            pass
    for durable in durables:
        done += await _migrate_consumer(js, durable, dict(consumer_settings or deployment_consumer_settings()))
    return done


async def _migrate_consumer(js, durable: Durable, settings: dict[str, object]) -> list[str]:
    want = consumer_config(durable.stream, durable.subject, durable.durable, **settings)
    try:
        info = await js.consumer_info(durable.stream, durable.durable)
    except NotFoundError:
        await js.add_consumer(durable.stream, want)
        return [f"created consumer {durable.stream}/{durable.durable}"]
    if not consumer_differences(info.config, want):
        return []
    # Keep the start position the consumer has (after a recreation it starts at a sequence).
    want.deliver_policy, want.opt_start_seq = info.config.deliver_policy, info.config.opt_start_seq
    try:
        await js.add_consumer(durable.stream, want)  # same name: an update where NATS allows it
        return [f"updated consumer {durable.stream}/{durable.durable}"]
    except (nats.js.errors.BadRequestError, nats.js.errors.ServerError) as exc:  # "... can not be updated"
        if exc.err_code != CONSUMER_CREATE_ERROR:
            raise
    # Not updatable in place: recreate from the ack floor, so every unacknowledged message is kept.
    start = (info.ack_floor.stream_seq if info.ack_floor else 0) + 1
    want.deliver_policy, want.opt_start_seq = DeliverPolicy.BY_START_SEQUENCE, start
    await js.delete_consumer(durable.stream, durable.durable)
    await js.add_consumer(durable.stream, want)
    return [f"recreated consumer {durable.stream}/{durable.durable} from stream sequence {start}"]


async def verify(js, expected: Iterable[tuple[str, ConsumerConfig]], *, replicas: int) -> None:
    """Raise ``JetStreamNotReady`` unless every stream and each ``(stream, consumer config)`` exists as expected."""
    problems = []
    for spec in ALL_STREAMS:
        try:
            info = await js.stream_info(spec.name)
        except NotFoundError:
            problems.append(f"stream {spec.name} does not exist")
            continue
        problems += [f"stream {spec.name}: {d}" for d in stream_differences(info.config, stream_config(spec, replicas))]
    for name in RETIRED_STREAMS:
        try:
            await js.stream_info(name)
            problems.append(f"stream {name} is retired and still exists")
        except NotFoundError:
            pass
    for stream, want in expected:
        try:
            info = await js.consumer_info(stream, want.durable_name)
        except NotFoundError:
            problems.append(f"consumer {stream}/{want.durable_name} does not exist")
            continue
        problems += [f"consumer {stream}/{want.durable_name}: {d}" for d in consumer_differences(info.config, want)]
    if problems:
        raise JetStreamNotReady("JetStream is not migrated: " + "; ".join(problems)
                                + " (run `erpilot migrate` with ERPILOT_NATS_URL and the admin NATS user,"
                                " ERPILOT_NATS_REPLICAS as in this deployment)")


def subscribed_durables(broker) -> list[tuple[str, ConsumerConfig]]:
    """``(stream, config)`` of every durable consumer the broker's subscribers bind to."""
    found = []
    for subscriber in broker.subscribers:
        options = getattr(subscriber, "extra_options", None) or {}
        if options.get("durable") and options.get("stream"):
            found.append((options["stream"], subscriber.config))
    return found
