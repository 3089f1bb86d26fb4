"""Keyset cursors: round trip, and anything else refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from erpilot_platform import cursors

pytestmark = pytest.mark.unit


def test_a_cursor_round_trips_the_last_items_key():
    at = datetime(2026, 12, 1, 20, 0, 0, 123456, tzinfo=UTC)
    assert cursors.decode(cursors.encode(at, "ses_1")) == (at, "ses_1")


@pytest.mark.parametrize("bad", ["", "nope", "W10", "WyJ4IiwxXQ", "WyIyMDI2LTEyLTAxVDIwOjAwOjAwIiwgInMiXQ"])
def test_anything_else_is_a_bad_cursor(bad):
    with pytest.raises(cursors.BadCursor):
        cursors.decode(bad)
