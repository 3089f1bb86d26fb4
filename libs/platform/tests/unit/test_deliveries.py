"""``stored_at`` is JetStream's time for the message being handled (a time no publisher chooses), now elsewhere."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from erpilot_platform.deliveries import handling, stored_at

pytestmark = pytest.mark.unit


def test_stored_at_is_the_streams_time_while_handling_and_now_outside():
    stored = datetime.now(UTC) - timedelta(days=30)
    with handling(SimpleNamespace(metadata=SimpleNamespace(timestamp=stored))):
        assert stored_at() == stored
    assert datetime.now(UTC) - stored_at() < timedelta(seconds=5)
    with handling(SimpleNamespace()):  # not a JetStream message: now
        assert datetime.now(UTC) - stored_at() < timedelta(seconds=5)
