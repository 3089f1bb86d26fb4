"""The NATS connection every service uses and request/reply between services (streams and durable
consumers are declared by `erpilot migrate`: ``erpilot_platform.jetstream``).

The endpoints a service offers (commands, events, queries) and their shared error policy are in
``erpilot_platform.endpoints``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from typing import Any

import nats.aio.client
import nats.errors
import nats.js.errors
from faststream.nats import NatsBroker
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.security import SASLPlaintext
from nats.js.client import JetStreamContext
from pydantic import ValidationError

from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.requests import Endpoint, Rep, Req
from erpilot_contracts.subjects import COMMANDS_STREAM, PREFIX
from erpilot_platform.batches import refuse_network_wait

log = logging.getLogger(__name__)


class TransientError(RuntimeError):
    """A failure a later retry can cure (a downstream service did not answer in time, ...)."""


class ServiceUnavailable(TransientError):
    """The service behind a subject did not answer (no responders, timeout, broker away)."""

    def __init__(self, subject: str, reason: str):
        super().__init__(f"{subject}: {reason}")
        self.subject = subject


class ReplyError(RuntimeError):
    """A service answered ``ok: false``; ``error`` is its ``ErrorV1`` (code, message, status, details)."""

    def __init__(self, subject: str, reply: ReplyV1):
        super().__init__(f"{reply.error.code}: {reply.error.message}")
        self.subject = subject
        self.error = reply.error


class PayloadTooLarge(ValueError):
    """The message would exceed the broker's payload limit: the request is refused, never retried."""

    def __init__(self, subject: str, size: int, limit: int):
        super().__init__(f"{subject}: a message of {size} bytes exceeds the broker's limit of {limit} bytes")
        self.subject, self.size, self.limit = subject, size, limit


# Room kept below the server's max_payload for headers (trace context, reply inbox, message id).
HEADER_ROOM_BYTES = 16 * 1024


def payload_limit(broker: NatsBroker) -> int:
    """The largest message body this broker may send (the server's ``max_payload`` less header room)."""
    try:
        max_payload = broker.connection.max_payload
    except Exception:  # not connected yet: the server default
        max_payload = nats.aio.client.DEFAULT_MAX_PAYLOAD_SIZE
    return max_payload - HEADER_ROOM_BYTES


# The agent runs the model and is the least trusted service: it may use whatever reaches it, a request's reply
# inbox included. So a service that asks the agent waits for the agent's answers on a connection of its own, under
# an inbox prefix apart (``inbox_root(service, "agent")``), the only one of its prefixes the agent may publish to
# (src/erpilot/stack/nats_security.py); its requests to the approval service and the ERP wait under its own
# ``_INBOX.<service>``, which the agent may not publish to and never sees (issue 32: a forged "409 expired" reached
# an approver whose decision was committed).
ANSWERED_APART: dict[str, tuple[str, ...]] = {"gateway": ("agent",)}


def inbox_root(service: str, answerer: str | None = None) -> str:
    """The fixed part of ``service``'s inboxes, the one NATS permissions name: its own, or the one apart where it
    waits for ``answerer``'s answers."""
    return f"_INBOX.{service}" if answerer is None else f"_INBOX.{service}_from_{answerer}"


def new_inbox_prefix(service: str, answerer: str | None = None) -> str:
    """``inbox_root`` and a random token, fresh for each connection or consumer.

    nats-py's inboxes are ``<prefix>.<NUID>`` and its NUIDs are sequential (a random increment of at most a few
    hundred): who sees one inbox guesses the next. Under a random prefix, seeing the inboxes of one connection
    tells nothing of another's.
    """
    return f"{inbox_root(service, answerer)}.{secrets.token_hex(16)}"


def answering_service(subject: str) -> str | None:
    """The service that answers a command or query subject (``erpilot.v1.cmd.<service>.…``), else None."""
    parts = subject.split(".")
    if subject.startswith(f"{PREFIX}.") and len(parts) > 4 and parts[2] in ("cmd", "req", "query"):
        return parts[3]
    return None


class SplitInboxBroker(NatsBroker):
    """A broker whose requests to the services in ``apart`` go out on those services' own connections (their
    answers arrive there); everything else (subscriptions, publishes, other requests) is this broker's."""

    def __init__(self, *args: Any, apart: dict[str, NatsBroker], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.apart = apart

    async def _connect(self) -> Any:
        for side in self.apart.values():
            await side.connect()  # a no-op once connected: ``connect_with_retry`` may call this again
        return await super()._connect()

    async def stop(self, *args: Any) -> None:
        await super().stop(*args)
        for side in self.apart.values():
            await side.stop()

    async def request(self, message: Any, subject: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        side = self.apart.get(answering_service(subject) or "")
        if side is None:
            return await super().request(message, subject, *args, **kwargs)
        return await side.request(message, subject, *args, **kwargs)


def create_broker(nats_url: str, service: str, *, user: str | None = None, password: str | None = None,
                  middlewares: tuple = ()) -> NatsBroker:
    """A broker that reconnects forever: a NATS restart pauses a service, it does not stop it. Where ``service``
    asks the agent (``ANSWERED_APART``), its requests to the agent use a connection of their own."""
    apart = {answerer: _broker(nats_url, service, answerer, user, password, middlewares)
             for answerer in ANSWERED_APART.get(service, ())}
    return _broker(nats_url, service, None, user, password, middlewares, apart=apart)


def _broker(nats_url: str, service: str, answerer: str | None, user: str | None, password: str | None,
            middlewares: tuple, *, apart: dict[str, NatsBroker] | None = None) -> NatsBroker:
    # Telemetry: a span per publish and per processed message, with the trace context carried in
    # message headers, so one tool call is one trace across every service it touches.
    middlewares = (NatsTelemetryMiddleware(), *middlewares)

    async def reconnected() -> None:
        await rearm_pulls(broker)

    options: dict[str, Any] = {"apart": apart} if apart else {}
    broker = (SplitInboxBroker if apart else NatsBroker)(
        [url.strip() for url in nats_url.split(",")],
        # Replies, PubAcks and pull-consumer deliveries come to this service's own inboxes, so NATS
        # permissions can stop any other service from reading (or forging) them.
        inbox_prefix=new_inbox_prefix(service, answerer),
        name=f"erpilot-{service}" + (f"-to-{answerer}" if answerer else ""),
        security=SASLPlaintext(username=user, password=password) if user else None,
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        connect_timeout=5,
        graceful_timeout=15,
        middlewares=middlewares,
        log_level=logging.DEBUG,
        # A plain logger: ``configure_logging`` sends it through the JSON formatter with everything else.
        logger=logging.getLogger("faststream.access.nats"),
        reconnected_cb=reconnected,
        **options,
    )
    return broker


# Published by the new leader of a clustered consumer (one subject per stream and durable).
CONSUMER_LEADER_ELECTED = "$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED"


def leader_elected_subject(stream: str, durable: str) -> str:
    return f"{CONSUMER_LEADER_ELECTED}.{stream}.{durable}"


def _pulls(broker: NatsBroker) -> list[tuple[Any, JetStreamContext.PullSubscription]]:
    """(faststream subscriber, nats-py pull subscription) of every durable consumer ``broker`` runs."""
    found = []
    for subscriber in broker.subscribers:
        subscription = getattr(subscriber, "subscription", None)
        if isinstance(subscription, JetStreamContext.PullSubscription) and getattr(subscriber, "pull_sub", None):
            found.append((subscriber, subscription))
    return found


async def _rearm(broker: NatsBroker, subscriber: Any, subscription: JetStreamContext.PullSubscription) -> bool:
    # nats-py keeps the pull subject and the inbox private; the request is the one ``fetch(1)`` sends.
    request = {"batch": 1, "expires": int(subscriber.pull_sub.timeout * 1_000_000_000) - 100_000}
    try:
        await broker.connection.publish(subscription._nms, json.dumps(request).encode(), reply=subscription._deliver)
    except Exception:  # the connection dropped again: the next reconnect re-arms
        log.warning("could not re-arm the pull of %s", subscription._consumer, exc_info=True)
        return False
    return True


async def rearm_pulls(broker: NatsBroker) -> int:
    """Send every durable consumer of ``broker`` a fresh pull request; returns how many were sent.

    A pull request waits on the server (``endpoints.PULL_WAIT_SECONDS``, long, so an idle stack costs
    nothing), and a restarted server has forgotten it, while nats-py's ``fetch`` waits out its own timeout
    before it asks again (``PullSubscription._fetch_one`` reads its inbox until the deadline; an idle
    heartbeat would not help: a missed one never ends the wait early). So on every reconnect (nats-py
    replays the inbox subscriptions first, then calls this) each consumer asks again at once, on the same
    inbox the waiting ``fetch`` reads: the next message reaches it now, not at the end of the old wait.
    Where the old request survived (a reconnect without a server restart), two are outstanding for a
    while: a second message waits in the subscription's queue, where the next ``fetch`` takes it before it
    asks (one message at a time, as ever), and the spare request's expiry (408) only makes faststream's
    loop fetch again.
    """
    sent = sum([await _rearm(broker, subscriber, subscription) for subscriber, subscription in _pulls(broker)])
    log.info("re-armed %d pull consumer(s) after a reconnect", sent)
    return sent


async def watch_consumer_leaders(broker: NatsBroker) -> None:
    """Re-arm a consumer's pull when a new leader is elected for it (a cluster node died or stepped down).

    The waiting pull requests live on the consumer's leader only; when it dies, a client connected to
    another node does not reconnect, so ``rearm_pulls`` is not called: the new leader's advisory is the
    sign instead (a single server publishes none, and needs none: its restart is a reconnect).
    """
    for subscriber, subscription in _pulls(broker):
        async def rearm(_: Any, subscriber: Any = subscriber, subscription: Any = subscription) -> None:
            if await _rearm(broker, subscriber, subscription):
                log.info("re-armed the pull of %s: its consumer has a new leader", subscription._consumer)

        await broker.connection.subscribe(leader_elected_subject(subscription._stream, subscription._consumer),
                                          cb=rearm)


async def request(broker: NatsBroker, subject: str, payload: Message, *, durable: bool, timeout: float = 10.0
                  ) -> ReplyV1:
    """Send a command (``durable=True``: through JetStream) or a query and wait for its ``ReplyV1``."""
    refuse_network_wait(subject)  # not from a batched handler before its unit of work: it holds the batch open
    data = payload.model_dump(mode="json")
    size = len(json.dumps(data))  # faststream's own encoding (ASCII): an upper bound of what is sent
    if size > (limit := payload_limit(broker)):
        raise PayloadTooLarge(subject, size, limit)
    try:
        response = await broker.request(
            data, subject,
            stream=COMMANDS_STREAM.name if durable else None, timeout=timeout,
        )
    except (TimeoutError, nats.errors.TimeoutError) as exc:
        raise ServiceUnavailable(subject, "no answer in time") from exc
    except nats.errors.MaxPayloadError as exc:
        raise PayloadTooLarge(subject, size, limit) from exc
    except nats.errors.NoRespondersError as exc:
        raise ServiceUnavailable(subject, "no service is listening") from exc
    except (nats.js.errors.NoStreamResponseError, nats.js.errors.ServiceUnavailableError) as exc:
        # The stream stored nothing (no PubAck): on a cluster, its leader is being re-elected.
        raise ServiceUnavailable(subject, "the command stream is not available") from exc
    except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError,
            nats.errors.StaleConnectionError, nats.errors.OutboundBufferLimitError) as exc:
        raise ServiceUnavailable(subject, "broker unavailable") from exc
    try:
        return ReplyV1.model_validate_json(response.body)
    except ValidationError as exc:
        raise ServiceUnavailable(subject, f"malformed reply: {exc.errors()[0]['msg']}") from exc


async def call(broker: NatsBroker, endpoint: Endpoint[Req, Rep], payload: Req, *, timeout: float = 10.0) -> Rep:
    """``endpoint``'s request, then the reply's ``data`` as its declared reply model; ``ReplyError`` when the
    answer is not ok."""
    reply = await send(broker, endpoint, payload, timeout=timeout)
    if not reply.ok:
        raise ReplyError(endpoint.subject, reply)
    return endpoint.reply.model_validate(reply.data or {})


async def send(broker: NatsBroker, endpoint: Endpoint[Req, Any], payload: Req, *, timeout: float = 10.0
               ) -> ReplyV1:
    """``endpoint``'s request as declared (durable, retried or a query), answered by its ``ReplyV1`` as is; a
    payload of another model than the declared one is a TypeError, and nothing is sent."""
    if not isinstance(payload, endpoint.request):
        raise TypeError(f"{endpoint.subject} takes {endpoint.request.__name__}, not {type(payload).__name__}")
    if endpoint.retried:
        return await _retried(broker, endpoint.subject, payload, timeout=timeout)
    return await request(broker, endpoint.subject, payload, durable=endpoint.durable, timeout=timeout)


# A retried command (``requests.retried``) is sent up to this many times within its timeout: each attempt waits
# its share of it, and a lost request, a receiver that died before answering or one that answered 503 (a
# transient failure on its side) is asked again with the same message, its same key.
RETRIED_ATTEMPTS = 3
RETRY_PAUSE_SECONDS = 0.25  # between attempts that failed at once (no responders: the receiver restarts)


async def _retried(broker: NatsBroker, subject: str, payload: Message, *, timeout: float) -> ReplyV1:
    """Send ``payload`` as a core request until an answer that is not a transient failure comes, or ``timeout``
    is spent (then the last ``ServiceUnavailable`` or 503 stands). The receiver stores the command before it
    answers and keys it by the request's own id, so every attempt is the same command: one effect."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            reply = await request(broker, subject, payload, durable=False,
                                  timeout=max(min(left, timeout / RETRIED_ATTEMPTS), 0.01))
            if reply.ok or reply.error.status != 503:
                return reply
            failure: ReplyV1 | ServiceUnavailable = reply
        except ServiceUnavailable as exc:
            failure = exc
        if deadline - time.monotonic() <= RETRY_PAUSE_SECONDS:
            if isinstance(failure, ServiceUnavailable):
                raise failure
            return failure
        log.info("no answer to %s yet (%s); sending it again", subject, failure)
        await asyncio.sleep(RETRY_PAUSE_SECONDS)
