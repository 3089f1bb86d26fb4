"""``?since=`` on ``/v1/approvals`` and ``/v1/audit`` (SPEC §11): a time with a zone that UTC cannot hold is 422
``invalid_datetime`` and asks no service (it used to reach the database as a 500); one without a zone stays 422
``invalid_since``; a good one reaches the service in UTC."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import jwt
import pytest

from erpilot_contracts import subjects

from .fake_services import RecordingServices, gateway_client

pytestmark = pytest.mark.unit

SECRET = "gateway-test-secret-" + "t" * 32


def answer(subject: str, payload: Any) -> dict:
    if subject == subjects.APPROVAL_QUERY_LIST:
        return {"items": [], "next_cursor": None}
    if subject == subjects.APPROVAL_QUERY_AUDIT:
        return {"items": []}
    raise AssertionError(subject)


FAKE = RecordingServices(answer)
CLIENT = gateway_client(FAKE, SECRET)
TOKEN = jwt.encode({"sub": "ada", "roles": ["admin", "approver"], "exp": int(time.time()) + 3600}, SECRET,
                   algorithm="HS256")


def get(path: str, since: str):
    before = len(FAKE.queries)
    response = CLIENT.get(path, params={"since": since}, headers={"Authorization": f"Bearer {TOKEN}"})
    return response, FAKE.queries[before:]


@pytest.mark.parametrize("path", ["/v1/approvals", "/v1/audit"])
@pytest.mark.parametrize("since", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
def test_a_since_beyond_what_utc_holds_is_422_invalid_datetime_and_asks_nothing(path, since):
    response, asked = get(path, since)

    assert (response.status_code, response.json()["code"]) == (422, "invalid_datetime"), response.text
    assert asked == []


@pytest.mark.parametrize("path", ["/v1/approvals", "/v1/audit"])
def test_a_since_without_a_zone_is_422_invalid_since_and_a_good_one_reaches_the_service_in_utc(path):
    naive, asked = get(path, "2026-12-01T08:00:00")
    assert (naive.status_code, naive.json()["code"], asked) == (422, "invalid_since", [])

    good, [(_, query)] = get(path, "2026-12-01T08:00:00+02:00")
    assert good.status_code == 200, good.text
    assert query.since == datetime(2026, 12, 1, 6, 0, tzinfo=UTC) and query.since.utcoffset().total_seconds() == 0
