"""The three kinds of endpoints a service offers (commands, events, queries), with one error policy.

Error policy (see PITFALLS.md: faststream's default would TERM a message on any exception):
- a message that does not parse or validate is answered with ``invalid_message`` when it has a reply
  inbox (hostile JSON, see ``erpilot_contracts.json_input``, with ``details.reason`` ``invalid_json`` or
  ``invalid_arguments``), copied to the dead-letter stream and acknowledged: a poison message never blocks a consumer;
  so is one its handler refuses as ``refusals.InvalidMessage`` (e.g. no valid requester assertion);
- a handler returns its typed result (answered as ``ReplyV1.success``) or raises ``refusals.Refused``
  (answered as that failure and acknowledged); a handler may still return a ``ReplyV1`` as it is;
- a transient failure (database or broker away, serialization conflict, downstream timeout) is NAKed
  with a growing delay, so it is retried;
- any other exception is retried a few times, then dead-lettered and acknowledged;
- retries are bounded (``erpilot_platform.retries.RetryPolicy``: attempts and age): a message given up
  is dead-lettered, answered ``service_unavailable`` and acknowledged. ``erpilot dlq`` replays it.
A retried command (``requests.retried``, a core request no stream stores) has no redelivery to lean on: its
transient failure is answered 503 and its sender sends it again (``broker.send``); a message that does not parse
is answered ``invalid_message``, as a query's is.

Every handler runs in a span ``"<service> handle <Model>"`` with the ids its message concerns (session,
call, pending approval, operation) as attributes, and with those ids bound to every log line it writes.

The AsyncAPI document (``erpilot docs``) shows each endpoint's contract model as its payload: the
entry point declares the model, but receives the message itself unvalidated (``_UNCHECKED``,
``_whole_message``), because parsing stays here, under the error policy above.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Annotated, Any, TypeVar

from faststream import AckPolicy
from faststream.exceptions import NackMessage
from faststream.nats import JStream, NatsBroker, PullSub
from pydantic import BaseModel, ValidationError, WrapValidator

from erpilot_contracts import json_input
from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.events import Event
from erpilot_contracts.requests import Endpoint
from erpilot_contracts.subjects import COMMANDS_STREAM, DEAD_LETTER_STREAM, EVENTS_STREAM, dead_letter_subject
from erpilot_platform.batches import GroupCommit, batched, is_batched
from erpilot_platform.broker import ServiceUnavailable, TransientError, new_inbox_prefix
from erpilot_platform.db import is_transient
from erpilot_platform.deliveries import delivery_count, handling, keep_in_progress
from erpilot_platform.jetstream import ACK_WAIT_SECONDS, consumer_config  # noqa: F401 (re-exported)
from erpilot_platform.logs import CONTEXT_KEYS, bind, unbind
from erpilot_platform.refusals import InvalidMessage, Refused
from erpilot_platform.retries import RetryPolicy, dead_letter_headers, message_age_seconds
from erpilot_platform.telemetry import consumer_redeliveries, id_attributes, tracer

log = logging.getLogger(__name__)
M = TypeVar("M", bound=Message)
D = TypeVar("D")
# Every service's handler: ``async def handle(msg: XV1, deps: Deps) -> YV1`` (an event's: ``-> None``).
Handler = Callable[[Any, D], Awaitable[Any]]
# ERPILOT_ACK_WAIT_SECONDS overrides ACK_WAIT_SECONDS per deployment (`erpilot torture` shortens it).
HEARTBEAT_SECONDS = 5.0
# Documents the model without validating: a malformed body must reach the error policy, not fail in faststream.
_UNCHECKED = WrapValidator(lambda value, _: value)



def _parse(model: type[M], body: bytes) -> M:
    """The message as ``model``; hostile JSON (duplicate keys, deep nesting, NUL, ...) is refused first."""
    json_input.loads(body)
    return model.model_validate_json(body)


async def _whole_message(message: Any) -> Any:
    """faststream's decoder for our entries: the message itself, which the entry takes as its one argument.

    An entry taking the message as a second, ``Context`` parameter (``message: NatsMessage``) costs a thread
    pool round trip per message: fast_depends resolves a context field with ``Context.use``, a plain function,
    which its ``run_async`` hands to ``anyio.to_thread`` (fast_depends/core/model.py ``asolve``), inside a task
    group of its own. With the message as the decoded body, the entry has no context field to resolve.
    ``_parse`` validates ``message.body``."""
    return message


def _documented(entry: Callable, model: type[Message], name: str) -> Callable:
    """Name ``model`` as the payload of ``entry`` in the AsyncAPI document (it receives the whole message)."""
    entry.__annotations__["body"] = Annotated[model, _UNCHECKED]
    entry.__name__ = name
    return entry


def message_ids(message: BaseModel) -> dict[str, str]:
    """The ids a message concerns: its own fields first, then those of a nested record or grant."""
    found: dict[str, str] = {}
    for part in (message, *(value for value in vars(message).values() if isinstance(value, BaseModel))):
        for key in CONTEXT_KEYS:
            value = getattr(part, key, None)
            if key not in found and isinstance(value, str):
                found[key] = value
    return found


def _invalid_reply(exc: Exception) -> ReplyV1:
    if isinstance(exc, ValidationError):
        problems = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]
        return ReplyV1.failure("invalid_message", "message does not match its schema", 422, errors=problems)
    if isinstance(exc, json_input.BadInput):  # the edge check's own code says which rule refused it
        return ReplyV1.failure("invalid_message", f"message refused: {exc}", 422, reason=exc.code)
    return ReplyV1.failure("invalid_message", f"message could not be parsed: {exc}", 422)


# Each durable consumer pulls ONE message per request (issue 13). nats-py's ``fetch(batch > 1)`` first asks
# with ``no_wait``; when that request is answered by a status alone (typically the 408 of the previous pull,
# which expired as the client gave up on it) it sends a lingering pull for the whole batch and waits until
# the batch is full or the pull expires: a message that lands then is held up to the whole pull wait (seen
# as 0.6-1 s of queueing on ``cmd.approval.request`` and ``cmd.erp.commit``, aligned on the 1 s pulls; with
# 5 s pulls, approvals of 2.5-4 s). ``fetch(1)`` returns with the first message. The handlers still run
# ``max_workers`` at a time: faststream queues each message to its workers and pulls the next at once.
PULL_BATCH = 1
# How long one pull request waits on the server when nothing comes. Not the latency of a message (it is
# delivered as it arrives) but the idle cost: each wait is one request per consumer (about 20 consumers in the
# stack; at 1 s that was most of the idle stack's CPU, NATS and every service, issue 13). A pull the server
# forgot (a NATS restart) is not left to expire: ``broker.rearm_pulls`` asks again on every reconnect, so the
# first command after a restart is handled at once (test_foundation_faults).
PULL_WAIT_SECONDS = 30.0


class ServiceBus:
    """Registers a service's endpoints on its broker with the shared error policy."""

    def __init__(self, broker: NatsBroker, service: str, retry: RetryPolicy | None = None, *,
                 ack_wait: float = ACK_WAIT_SECONDS):
        self.broker = broker
        self.service = service
        self.retry = retry or RetryPolicy()
        self.ack_wait = ack_wait
        # The heartbeat must beat well inside the ack wait, or a slow handler's message is redelivered.
        self.heartbeat = min(HEARTBEAT_SECONDS, ack_wait / 3)

    async def dead_letter(self, message: Any, reason: str) -> bool:
        """Copy the message to the dead-letter stream with its origin; False if that failed."""
        raw = message.raw_message
        subject = dead_letter_subject(self.service, raw.subject)
        headers = {**dead_letter_headers(raw), "Erpilot-Reason": reason[:500],
                   "Erpilot-Attempts": str(delivery_count(message))}
        try:
            await self.broker.publish(message.body, subject, headers=headers, stream=DEAD_LETTER_STREAM.name)
        except Exception:  # the log line is the record of last resort
            log.exception("could not dead-letter a message from %s", raw.subject)
            return False
        log.error("dead-lettered message from %s: %s", raw.subject, reason)
        return True

    async def _give_up(self, message: Any, reason: str, reply: ReplyV1) -> dict:
        """Dead-letter and answer; if the copy cannot be stored, keep the message (retry later)."""
        if not await self.dead_letter(message, reason):
            raise NackMessage(delay=self.retry.transient_delay(delivery_count(message)))
        return reply.model_dump(mode="json")

    def _durable_name(self, subject: str) -> str:
        return f"{self.service}__{subject.replace('.', '_').replace('*', 'any').replace('>', 'all')}"

    async def _run_durable(self, model: type[M], handler: Callable[[M], Awaitable[Any]], message: Any,
                           group: GroupCommit | None = None) -> dict | None:
        try:
            parsed = _parse(model, message.body)
        except (ValidationError, ValueError) as exc:
            await self.dead_letter(message, f"invalid message: {exc}")
            return _invalid_reply(exc).model_dump(mode="json")
        attempt = delivery_count(message)
        if reason := self.retry.over_budget(attempt):
            return await self._give_up(message, reason, _gave_up_reply(reason))
        if attempt > 1:
            consumer_redeliveries.add(1, {"service": self.service, "subject": message.raw_message.subject})
        ids = message_ids(parsed)
        token = bind(**ids)
        heartbeat = asyncio.create_task(keep_in_progress(message, self.heartbeat))
        try:
            with tracer.start_as_current_span(f"{self.service} handle {model.__name__}",
                                              attributes={"erpilot.service": self.service, **id_attributes(**ids)}
                                              ), handling(message.raw_message):
                if group is None:
                    result = await handler(parsed)
                else:  # one transaction with the messages in flight beside it; returns after its commit
                    async with group.member():
                        result = await handler(parsed)
        except NackMessage:
            raise
        except InvalidMessage as refusal:
            await self.dead_letter(message, f"invalid message: {refusal.reason}: {refusal.message}")
            return refusal.reply().model_dump(mode="json")
        except Refused as refusal:
            return refusal.reply().model_dump(mode="json")
        except Exception as exc:
            if isinstance(exc, TransientError) or is_transient(exc):
                log.warning("transient failure on %s (attempt %d): %s", message.raw_message.subject, attempt, exc)
                reason = self.retry.give_up_transient(attempt, message_age_seconds(message.raw_message))
                if reason is None:
                    raise NackMessage(delay=self.retry.transient_delay(attempt)) from exc
                reason = f"{reason}; last error: {exc!r}"
                return await self._give_up(message, reason, _gave_up_reply(reason))
            log.exception("handler failed on %s (attempt %d)", message.raw_message.subject, attempt)
            if (reason := self.retry.give_up_bug(attempt)) is None:
                raise NackMessage(delay=self.retry.bug_delay(attempt)) from exc
            return await self._give_up(message, f"{reason}: {exc!r}", ReplyV1.failure(
                "internal_error", "the service could not process this message", 500))
        finally:
            heartbeat.cancel()
            unbind(token)
        return _as_reply(result)

    def register(self, handlers: Mapping[Endpoint[Any, Any] | Event[Any], Handler[D]], deps: D) -> None:
        """A service's entrypoint table: each endpoint or event served by its handler, called with ``deps``; the
        first paragraph of the handler's docstring describes it in the AsyncAPI document."""
        for endpoint, handle in handlers.items():
            bound = _bound(handle, deps)
            description = (inspect.getdoc(handle) or "").split("\n\n", 1)[0].replace("\n", " ")
            if isinstance(endpoint, Event):
                self.event(endpoint.subject, endpoint.model, description=description)(bound)
            else:
                self.serve(endpoint, description=description)(bound)

    def serve(self, endpoint: Endpoint[M, Any], *, description: str = ""):
        """The handler of ``endpoint`` as ``erpilot_contracts.requests`` declares it: a durable command or a
        query, on its subject, parsing its request model (so what callers send is what the handler reads)."""
        if endpoint.durable:
            return self.command(endpoint.subject, endpoint.request, description=description)
        if endpoint.retried:
            return self.retried(endpoint.subject, endpoint.request, description=description)
        return self.query(endpoint.subject, endpoint.request, description=description)

    def command(self, subject: str, model: type[M], *, max_workers: int = 8, description: str = ""):
        """A durable command consumer shared by every replica; the handler's ``ReplyV1`` is the answer."""
        return self._durable(subject, COMMANDS_STREAM.name, model, max_workers, description)

    def event(self, subject: str, model: type[M], *, max_workers: int = 4, description: str = ""):
        """A durable event consumer (one per service, shared by replicas); no answer is sent."""
        return self._durable(subject, EVENTS_STREAM.name, model, max_workers, description)

    def _durable(self, subject: str, stream: str, model: type[M], max_workers: int, description: str):
        def register(handler: Callable[[M], Awaitable[Any]]):
            # A batched handler (``batches.batched``) shares a transaction with the messages in flight beside it:
            # at most ``max_workers``, the messages this consumer handles at once.
            group = GroupCommit(max_workers) if is_batched(handler) else None
            @self.broker.subscriber(
                subject, stream=JStream(stream, declare=False),
                durable=self._durable_name(subject),
                pull_sub=PullSub(batch_size=PULL_BATCH, timeout=PULL_WAIT_SECONDS),
                # Deliveries come to an unguessable inbox of this service (``new_inbox_prefix``).
                inbox_prefix=f"{new_inbox_prefix(self.service)}.".encode(),
                # The settings table `erpilot migrate` declares (with this deployment's ack wait and retry
                # budget); this only binds to the consumer.
                config=consumer_config(stream, subject, self._durable_name(subject), ack_wait=self.ack_wait,
                                       max_deliver=self.retry.max_deliver),
                ack_policy=AckPolicy.NACK_ON_ERROR, max_workers=max_workers, decoder=_whole_message,
                title=f"{self.service}:{subject}", description=description or handler.__doc__ or "",
            )
            @partial(_documented, model=model, name=handler.__name__)
            async def entry(body: Any) -> dict | None:
                # ``body`` is the whole message (``_whole_message``). An event handler returns None, so
                # nothing is answered.
                return await self._run_durable(model, handler, body, group)

            return handler
        return register

    def query(self, subject: str, model: type[M], *, description: str = ""):
        """A core request/reply endpoint with a queue group: no side effects, answered by one replica."""
        return self._core(subject, model, description, retried=False)

    def retried(self, subject: str, model: type[M], *, max_workers: int = 8, description: str = ""):
        """A command as a core request with a queue group (``requests.retried``): no stream stores it, so the
        handler stores it (keyed by the request's own id) before it answers, and its sender sends it again while
        no answer comes. A transient failure is answered 503 ``service_unavailable`` (the sender retries). A message
        that does not parse is answered ``invalid_message`` and not dead-lettered: nothing stored it, nothing
        waits behind it, and its sender has the answer."""
        return self._core(subject, model, description, retried=True, max_workers=max_workers)

    def _core(self, subject: str, model: type[M], description: str, *, retried: bool, max_workers: int = 1):
        verb = "handle" if retried else "query"
        workers = {"max_workers": max_workers} if max_workers > 1 else {}

        def register(handler: Callable[[M], Awaitable[ReplyV1]]):
            @self.broker.subscriber(
                subject, queue=self.service, decoder=_whole_message, **workers,
                title=f"{self.service}:{subject}", description=description or handler.__doc__ or "",
            )
            @partial(_documented, model=model, name=handler.__name__)
            async def entry(body: Any) -> dict:
                message = body  # the whole message (``_whole_message``)
                try:
                    parsed = _parse(model, message.body)
                except (ValidationError, ValueError) as exc:
                    return _invalid_reply(exc).model_dump(mode="json")
                ids = message_ids(parsed)
                token = bind(**ids)
                try:
                    with tracer.start_as_current_span(f"{self.service} {verb} {model.__name__}",
                                                      attributes={"erpilot.service": self.service,
                                                                  **id_attributes(**ids)}):
                        return _as_reply(await handler(parsed))
                except Refused as refusal:
                    return refusal.reply().model_dump(mode="json")
                except ServiceUnavailable as exc:
                    return ReplyV1.failure("service_unavailable", str(exc), 503).model_dump(mode="json")
                except Exception as exc:
                    if retried and (isinstance(exc, TransientError) or is_transient(exc)):
                        log.warning("transient failure on %s: %s", subject, exc)
                        return ReplyV1.failure("service_unavailable", f"not processed now: {exc}", 503
                                               ).model_dump(mode="json")
                    log.exception("%s failed on %s", verb, subject)
                    return ReplyV1.failure("internal_error", f"the {'command' if retried else 'query'} failed",
                                           500).model_dump(mode="json")
                finally:
                    unbind(token)

            return handler
        return register


def _bound(handle: Handler[D], deps: D) -> Callable[[Any], Awaitable[Any]]:
    async def bound(msg: Any) -> Any:
        return await handle(msg, deps)

    bound.__name__ = handle.__name__
    return batched(bound) if is_batched(handle) else bound


def _as_reply(result: BaseModel | None) -> dict | None:
    """The answer to send: None (an event: nothing), a ``ReplyV1`` as it is, any other model as its success. A
    handler answers with its contract model: anything else is a bug, not something to guess a JSON form for."""
    if result is None:
        return None
    if isinstance(result, ReplyV1):
        return result.model_dump(mode="json")
    if isinstance(result, BaseModel):
        return ReplyV1.success(result).model_dump(mode="json")
    raise TypeError(f"a handler answered a {type(result).__name__}, not a contract model")


def _gave_up_reply(reason: str) -> ReplyV1:
    return ReplyV1.failure("service_unavailable", f"not processed, dead-lettered: {reason}", 503)
