"""Waiting for a service process a test started until it answers its readiness ping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from faststream.nats import NatsBroker

from erpilot_contracts.subjects import ping_subject
from erpilot_platform.broker import ServiceUnavailable, request
from erpilot_platform.runtime import PingV1


async def wait_answering(broker: NatsBroker, service: str, check_alive: Callable[[], None],
                         timeout: float = 60.0) -> None:
    """Until a replica of ``service`` answers ``ping_subject(service)``; ``check_alive()`` fails the test
    (it raises) as soon as the process under test has died, rather than waiting out the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check_alive()
        try:
            if (await request(broker, ping_subject(service), PingV1(), durable=False, timeout=1)).ok:
                return
        except ServiceUnavailable:
            await asyncio.sleep(0.2)  # no replica listens yet: ask again
    raise AssertionError(f"the {service} service did not become ready in {timeout:g} s")
