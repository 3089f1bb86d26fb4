"""The NATS connection every service uses and request/reply between services (streams and durable
consumers are declared by `erpilot migrate`: ``erpilot_platform.jetstream``).

The endpoints a service offers (commands, events, queries) and their shared error policy are in
``erpilot_platform.endpoints``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import nats.aio.client
import nats.errors
import nats.js.errors
from faststream.nats import NatsBroker
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.security import SASLPlaintext
from pydantic import ValidationError

from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.requests import Endpoint, Rep, Req
from erpilot_contracts.subjects import COMMANDS_STREAM

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


def create_broker(nats_url: str, service: str, *, user: str | None = None, password: str | None = None,
                  middlewares: tuple = ()) -> NatsBroker:
    """A broker that reconnects forever: a NATS restart pauses a service, it does not stop it."""
    # Telemetry: a span per publish and per processed message, with the trace context carried in
    # message headers, so one tool call is one trace across every service it touches.
    middlewares = (NatsTelemetryMiddleware(), *middlewares)
    return NatsBroker(
        [url.strip() for url in nats_url.split(",")],
        # Replies, PubAcks and pull-consumer deliveries come to this service's own inboxes, so NATS
        # permissions can stop any other service from reading (or forging) them.
        inbox_prefix=f"_INBOX.{service}",
        name=f"erpilot-{service}",
        security=SASLPlaintext(username=user, password=password) if user else None,
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
        connect_timeout=5,
        graceful_timeout=15,
        middlewares=middlewares,
        log_level=logging.DEBUG,
        # A plain logger: ``configure_logging`` sends it through the JSON formatter with everything else.
        logger=logging.getLogger("faststream.access.nats"),
    )


async def request(broker: NatsBroker, subject: str, payload: Message, *, durable: bool, timeout: float = 10.0
                  ) -> ReplyV1:
    """Send a command (``durable=True``: through JetStream) or a query and wait for its ``ReplyV1``."""
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
    """``endpoint``'s request as declared (durable or not), answered by its ``ReplyV1`` as is; a payload
    of another model than the declared one is a TypeError, and nothing is sent."""
    if not isinstance(payload, endpoint.request):
        raise TypeError(f"{endpoint.subject} takes {endpoint.request.__name__}, not {type(payload).__name__}")
    return await request(broker, endpoint.subject, payload, durable=endpoint.durable, timeout=timeout)
