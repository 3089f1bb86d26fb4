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


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_cursor_whose_time_does_not_convert_to_utc_is_invalid_datetime(at):
    forged = cursors.encode(datetime.fromisoformat(at), "ses_1")  # a zone, but outside UTC's years 1 to 9999

    with pytest.raises(cursors.BadDatetime) as caught:
        cursors.decode(forged)
    assert caught.value.code == "invalid_datetime" and isinstance(caught.value, cursors.BadCursor)


def test_utc_converts_a_time_with_a_zone():
    at = datetime.fromisoformat("2026-12-01T08:00:00+02:00")
    assert cursors.utc(at) == at and cursors.utc(at).utcoffset().total_seconds() == 0
    with pytest.raises(cursors.BadDatetime, match="since 9999-12-31T23:59:59-01:00 does not convert to UTC"):
        cursors.utc(datetime.fromisoformat("9999-12-31T23:59:59-01:00"), "since")
