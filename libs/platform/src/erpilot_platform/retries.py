"""When a durable consumer stops retrying a message and dead-letters it (``ServiceBus``'s give-up),
and what a dead letter records of its original.

A message is retried with a growing delay while its handler fails transiently, and a few times when
it fails with a bug. It is given up, copied to ``erpilot.v1.dlq.<service>.…`` and acknowledged, when
any of these holds:

- a transient failure on delivery ``max_attempts`` (``ERPILOT_DELIVERY_MAX_ATTEMPTS``);
- a transient failure when the message is older than ``max_age_seconds``
  (``ERPILOT_DELIVERY_MAX_AGE_SECONDS``, counted from when it entered its stream, so a message that
  waited out an outage gets one attempt before its age counts against it);
- a bug (any other exception) on delivery ``max_attempts_for_bugs`` (or ``max_attempts`` if lower);
- a delivery beyond ``max_attempts``: the earlier ones ended without an answer (the process crashed
  or hung each time), so it is dead-lettered without running the handler again.

JetStream's own ``max_deliver`` is set a little above ``max_attempts`` as a backstop, so a message
whose every delivery kills the process still stops coming back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MAX_DELIVER_MARGIN = 3


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 30
    max_age_seconds: float = 1800.0
    max_attempts_for_bugs: int = 5

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.max_age_seconds <= 0 or self.max_attempts_for_bugs < 1:
            raise ValueError(f"invalid retry policy {self}")

    @property
    def max_deliver(self) -> int:
        """JetStream's limit on deliveries of one message (the backstop above ``max_attempts``)."""
        return self.max_attempts + MAX_DELIVER_MARGIN

    def transient_delay(self, attempt: int) -> float:
        # Grows by 40 % each time (0.25 s, 0.35 s, ... 10 s): a message caught in a NATS failover (a new
        # stream leader takes 4-9 s to elect) is tried again within about 2 s of the leader's return.
        return min(0.25 * 1.4 ** min(attempt - 1, 20), 10.0)

    def bug_delay(self, attempt: int) -> float:
        return 0.5 * attempt

    def over_budget(self, attempt: int) -> str | None:
        """Why a delivery must not run at all (None: run it)."""
        if attempt > self.max_attempts:
            return f"delivered {attempt} times without an answer (more than {self.max_attempts} attempts)"
        return None

    def give_up_transient(self, attempt: int, age_seconds: float) -> str | None:
        """Why a transient failure ends the retries (None: retry)."""
        if attempt >= self.max_attempts:
            return f"gave up after {attempt} attempts (ERPILOT_DELIVERY_MAX_ATTEMPTS={self.max_attempts})"
        if age_seconds >= self.max_age_seconds:
            return (f"gave up after {attempt} attempts: the message is {age_seconds:.0f}s old "
                    f"(ERPILOT_DELIVERY_MAX_AGE_SECONDS={self.max_age_seconds:g})")
        return None

    def give_up_bug(self, attempt: int) -> str | None:
        """Why a failing handler (not a transient failure) is not retried again (None: retry)."""
        if attempt >= min(self.max_attempts_for_bugs, self.max_attempts):
            return f"failed {attempt} times"
        return None


# Headers of the original message a replay must not repeat (its reply inbox is long gone).
_NOT_REPLAYED = ("reply_to", "Nats-Msg-Id", "Nats-Expected-")


def dead_letter_headers(raw: Any) -> dict[str, str]:
    """The original's headers (minus reply and JetStream ones) and where it came from, for ``erpilot dlq``."""
    kept = {key: value for key, value in (raw.headers or {}).items()
            if not key.startswith(_NOT_REPLAYED) and not key.startswith("Erpilot-")}
    origin = {"Erpilot-Original-Subject": raw.subject}
    try:
        metadata = raw.metadata
        origin |= {"Erpilot-Original-Stream": metadata.stream,
                   "Erpilot-Original-Seq": str(metadata.sequence.stream),
                   # Named after the original, never predictable: the dead-letter stream takes every service's
                   # dead letters, so an id another service could foresee would let it have this one dropped
                   # (``outbox.published_msg_id``). Two copies of one message (an ack lost after dead-lettering)
                   # may both be stored; a replay is claimed once per original, so it still goes out once.
                   "Nats-Msg-Id": f"dlq:{metadata.stream}:{metadata.sequence.stream}.{uuid.uuid4().hex}"}
    except Exception:
        pass
    if (raw.headers or {}).get("Nats-Msg-Id"):
        origin["Erpilot-Original-Msg-Id"] = raw.headers["Nats-Msg-Id"]
    return {**kept, **origin}


def message_age_seconds(raw: Any) -> float:
    """How long ago a JetStream message entered its stream (0 when unknown)."""
    try:
        return (datetime.now(UTC) - raw.metadata.timestamp).total_seconds()
    except Exception:
        return 0.0
