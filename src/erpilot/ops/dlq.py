"""`erpilot dlq list|show|replay`: the dead letters of every consumer, and replaying them.

A consumer dead-letters a message it gave up on (``erpilot_platform.retries``) to
``erpilot.v1.dlq.<service>.<original subject>`` in ``ERPILOT_DEAD_LETTERS``, with its original
headers and ``Erpilot-Original-Subject|Stream|Seq``, ``Erpilot-Reason`` and ``Erpilot-Attempts``.
A dead letter is addressed by its sequence number in that stream.

Replay publishes the original body and headers to the original subject once per original message,
whatever happens: the replay is first claimed with a record on
``erpilot.v1.dlq.<service>.replayed.<original stream>.<original seq>`` published with
``Nats-Expected-Last-Subject-Sequence: 0``, which JetStream accepts only while no record exists (two
replays racing, or a replay of a second copy of the same message, find the first claim); the message
then goes out with ``Nats-Msg-Id: replay:<stream>:<seq>.<random>``, the random part kept in the claim. If
that publish fails the claim is withdrawn, so the replay can be tried again; if the replaying process died
in between, a replay within the streams' duplicate window publishes again under the claim's id (stored only
if the first never was).
A replayed message that fails again is dead-lettered anew (a new original, with a new sequence) and
can be replayed in turn.

With the least-privilege NATS users (``nats_security``) each step runs as the user allowed to take it
(``as_user``): reading as ``admin``, the record as the service that dead-lettered the message (it may
publish ``erpilot.v1.dlq.<service>.>``), the message as a service that sends that subject.

Who may publish into a dead-letter namespace is the service that owns it, and it writes the original
subject into a header. So a replay goes only to a subject that service consumes (its durable consumers in
the permission matrix, ``nats_security.consumers``, which the unit tests hold to the subscriptions the
service apps really register): replaying gives a service back what it could have done to itself, never
another service's command. A subject other services consume too (an event) reaches them as well, so a
dead letter on one is replayed only while it is a faithful copy of its original, still in its stream
with the same subject and body (a service cannot publish another's events). Anything else is refused
before the claim, so nothing is published and nothing recorded.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from erpilot.stack.nats_security import SERVICES, consumers, covers
from erpilot_contracts.subjects import ALL_STREAMS, DEAD_LETTER_STREAM, PREFIX, dead_letter_subject

RECORD_TOKEN = "replayed"  # erpilot.v1.dlq.<service>.replayed.… (original subjects never start so)
DUPLICATE_WINDOW_SECONDS = 120.0  # the streams' duplicate_window (erpilot_platform.broker.ensure_streams)
WRONG_LAST_SEQUENCE = 10071  # JetStream's error code for a failed Nats-Expected-Last-Subject-Sequence
_NOT_REPLAYED = ("Erpilot-", "Nats-")


AsUser = Callable[[str, str], Awaitable[Any]]


class DeadLetterError(RuntimeError):
    """What the operator asked for does not exist or cannot be done; the message says why."""


@dataclass
class DeadLetter:
    seq: int
    subject: str
    time: str
    original_subject: str
    original: str  # "<stream>:<seq>" of the original message (the replay key)
    reason: str
    attempts: int | None
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    replayed: dict[str, Any] | None = None
    data: bytes = field(default=b"", repr=False)  # the body exactly as dead-lettered

    @property
    def service(self) -> str:
        return self.subject.removeprefix(f"{PREFIX}.dlq.").split(".", 1)[0]

    def as_json(self, *, with_body: bool = True) -> dict[str, Any]:
        data = {**asdict(self), "service": self.service}
        data.pop("data")
        if not with_body:
            data.pop("body")
            data.pop("headers")
        return data


def record_subject(service: str, original: str) -> str:
    return f"{PREFIX}.dlq.{service}.{RECORD_TOKEN}.{original.replace(':', '.')}"


def is_record(subject: str) -> bool:
    tokens = subject.split(".")
    return len(tokens) > 4 and tokens[4] == RECORD_TOKEN


def _decode(data: bytes | None) -> Any:
    text = (data or b"").decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _dead_letter(raw: Any) -> DeadLetter:
    headers = dict(raw.headers or {})
    original_stream, original_seq = headers.get("Erpilot-Original-Stream"), headers.get("Erpilot-Original-Seq")
    # Dead letters written before origins were recorded are keyed by their own sequence.
    original = f"{original_stream}:{original_seq}" if original_stream and original_seq else f"dlq:{raw.seq}"
    attempts = headers.get("Erpilot-Attempts")
    return DeadLetter(
        seq=raw.seq, subject=raw.subject, time=raw.time.astimezone(UTC).isoformat() if raw.time else "",
        original_subject=headers.get("Erpilot-Original-Subject", ""), original=original,
        reason=headers.get("Erpilot-Reason", ""), attempts=int(attempts) if attempts else None,
        headers=headers, body=_decode(raw.data), data=raw.data or b"")


async def _replay_record(js: Any, letter: DeadLetter) -> dict[str, Any] | None:
    import nats.js.errors

    try:
        raw = await js.get_last_msg(DEAD_LETTER_STREAM.name, record_subject(letter.service, letter.original))
    except nats.js.errors.NotFoundError:
        return None
    record = _decode(raw.data)
    return {**record, "record_seq": raw.seq} if isinstance(record, dict) else {"record_seq": raw.seq}


def _within_duplicate_window(record: dict[str, Any] | None) -> bool:
    try:
        age = datetime.now(UTC) - datetime.fromisoformat(record["replayed_at"])
    except (TypeError, KeyError, ValueError):
        return False
    return age.total_seconds() < DUPLICATE_WINDOW_SECONDS - 10


async def list_dead_letters(js: Any, *, service: str | None = None, limit: int = 50) -> list[DeadLetter]:
    """The newest ``limit`` dead letters (oldest first), each with its replay record if any."""
    import nats.js.errors

    info = await js.stream_info(DEAD_LETTER_STREAM.name)
    found: list[DeadLetter] = []
    seq = info.state.first_seq
    filter_subject = f"{PREFIX}.dlq.{service}.>" if service else f"{PREFIX}.dlq.>"
    while seq and seq <= info.state.last_seq:
        try:
            raw = await js.get_msg(DEAD_LETTER_STREAM.name, seq, subject=filter_subject, next=True)
        except nats.js.errors.NotFoundError:
            break
        seq = raw.seq + 1
        if not is_record(raw.subject):
            found = [*found[-(limit - 1):], _dead_letter(raw)] if limit > 1 else [_dead_letter(raw)]
    for letter in found:
        letter.replayed = await _replay_record(js, letter)
    return found


async def show_dead_letter(js: Any, seq: int) -> DeadLetter:
    import nats.js.errors

    try:
        raw = await js.get_msg(DEAD_LETTER_STREAM.name, seq)
    except nats.js.errors.NotFoundError:
        raise DeadLetterError(f"no dead letter {seq} in {DEAD_LETTER_STREAM.name}") from None
    if is_record(raw.subject) or not raw.subject.startswith(f"{PREFIX}.dlq."):
        raise DeadLetterError(f"message {seq} is a replay record, not a dead letter")
    letter = _dead_letter(raw)
    letter.replayed = await _replay_record(js, letter)
    return letter


def consumed_subjects(service: str) -> tuple[str, ...]:
    """The subjects ``service`` consumes from JetStream (its durable consumers), from the permission matrix."""
    return tuple(consumer.subject for consumer in consumers(service)) if service in SERVICES else ()


def _consumes(service: str, subject: str) -> bool:
    return any(covers(pattern, subject) for pattern in consumed_subjects(service))


async def _is_faithful_copy(js: Any, letter: DeadLetter) -> bool:
    """Whether the dead letter's original is still in its stream with the same subject and body."""
    import nats.js.errors

    stream, _, seq = letter.original.partition(":")  # from headers its writer chose: checked before use
    if stream not in {spec.name for spec in ALL_STREAMS} or not seq.isdigit():
        return False
    try:
        original = await js.get_msg(stream, int(seq))
    except nats.js.errors.APIError:  # not found, or a sequence the stream never had
        return False
    return original.subject == letter.original_subject and (original.data or b"") == letter.data


async def check_replayable(js: Any, letter: DeadLetter) -> None:
    """Raise DeadLetterError (saying why, and that nothing was published) unless the dead letter may be
    replayed: to a subject the service owning its namespace consumes, and, where other services consume
    that subject too, only as a faithful copy of its original."""
    service, subject = letter.service, letter.original_subject
    refused = f"dead letter {letter.seq} refused, nothing published"
    if not subject:
        raise DeadLetterError(f"{refused}: it does not name its original subject")
    if service not in SERVICES:
        raise DeadLetterError(f"{refused}: {letter.subject} is in the namespace of {service!r}, which is no "
                              f"Erpilot service ({', '.join(SERVICES)})")
    if any(wildcard in subject.split(".") for wildcard in ("*", ">")) or dead_letter_subject(
            service, subject) != letter.subject:
        raise DeadLetterError(f"{refused}: it is stored on {letter.subject} but names {subject} as its original")
    if not _consumes(service, subject):
        raise DeadLetterError(
            f"{refused}: it is in {service}'s dead-letter namespace but names {subject}, which {service} does "
            f"not consume; a dead letter is replayed only to a subject of the service that dead-lettered it "
            f"({service} consumes: {', '.join(consumed_subjects(service)) or 'nothing'})")
    others = [other for other in SERVICES if other != service and _consumes(other, subject)]
    if others and not await _is_faithful_copy(js, letter):
        raise DeadLetterError(
            f"{refused}: {subject} is consumed by {', '.join(others)} too, and its original ({letter.original}) "
            f"is no longer in its stream with this subject and body, so nothing shows that {service} did not "
            f"write it")


async def replay_dead_letter(js: Any, seq: int, *, by: str, as_user: AsUser | None = None
                             ) -> tuple[bool, DeadLetter]:
    """Publish the dead letter's message again, once per original: (published now?, the dead letter).

    ``as_user(role, subject)`` gives the JetStream context to publish with (``role`` is ``record`` or
    ``message``); without it, ``js`` does everything. A dead letter ``check_replayable`` refuses raises
    DeadLetterError before anything is published or recorded."""
    import nats.js.errors

    letter = await show_dead_letter(js, seq)
    await check_replayable(js, letter)
    record_js = await as_user("record", letter.subject) if as_user else js
    message_js = await as_user("message", letter.original_subject) if as_user else js
    # The replay's Nats-Msg-Id carries a random part kept in the claim: a replay that died between its claim and
    # its publish publishes again under the same id, and no other publisher can foresee it (JetStream drops a
    # second message with an id whatever its subject; ``outbox.published_msg_id``).
    record = {"dead_letter_seq": seq, "subject": letter.original_subject, "by": by,
              "replayed_at": datetime.now(UTC).isoformat(), "msg_id": f"replay:{letter.original}.{uuid.uuid4().hex}"}
    headers = {key: value for key, value in letter.headers.items() if not key.startswith(_NOT_REPLAYED)}
    headers |= {"Nats-Msg-Id": record["msg_id"], "Erpilot-Replay-Of": letter.original}
    try:
        claim = await record_js.publish(record_subject(letter.service, letter.original), json.dumps(record).encode(),
                                        stream=DEAD_LETTER_STREAM.name,
                                        headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    except nats.js.errors.BadRequestError as exc:
        if exc.err_code != WRONG_LAST_SEQUENCE:
            raise
        letter.replayed = await _replay_record(js, letter)
        if _within_duplicate_window(letter.replayed):
            # A claim this recent may belong to a replay that died before publishing: publishing again
            # under the claim's Nats-Msg-Id is stored only if the first never was.
            headers["Nats-Msg-Id"] = letter.replayed.get("msg_id", f"replay:{letter.original}")
            ack = await message_js.publish(letter.original_subject, letter.data, headers=headers)
            return not ack.duplicate, letter
        return False, letter
    try:
        await message_js.publish(letter.original_subject, letter.data, headers=headers)
    except BaseException:
        with contextlib.suppress(Exception):  # withdraw the claim, so the operator can try again
            await js.delete_msg(DEAD_LETTER_STREAM.name, claim.seq)
        raise
    letter.replayed = {**record, "record_seq": claim.seq}
    return True, letter
