"""The approval service's own dead letters (webhook deliveries it gave up on) on the dead-letter stream."""

from __future__ import annotations

from faststream.nats import NatsBroker

from erpilot_contracts.subjects import DEAD_LETTER_STREAM, dead_letter_subject

SERVICE = "approval"


class NatsDeadLetters:
    def __init__(self, broker: NatsBroker):
        self.broker = broker

    async def publish(self, body: bytes, *, source: str, headers: dict[str, str]) -> None:
        await self.broker.publish(body, dead_letter_subject(SERVICE, source), headers=headers,
                                  stream=DEAD_LETTER_STREAM.name)
