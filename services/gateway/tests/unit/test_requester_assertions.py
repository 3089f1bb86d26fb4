"""The gateway's requester assertion lasts its ttl, but never past the signed-in token's own expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import jwt
import pytest

from erpilot_gateway.auth import User
from erpilot_gateway.requesters import RequesterAssertions
from erpilot_platform.assertions import DEFAULT_TTL
from erpilot_platform.grants import load_signing_key, new_keypair_env

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
KEY = load_signing_key(new_keypair_env("ERPILOT_ASSERTION")["ERPILOT_ASSERTION_SIGNING_KEY"])


def expiry_of(token: str) -> datetime:
    claims = jwt.decode(token, options={"verify_signature": False})
    return datetime.fromtimestamp(claims["exp"], UTC)


def test_an_assertion_lasts_its_ttl_while_the_token_lasts_longer():
    user = User(sub="alice", roles=("requester",), expires_at=(NOW + timedelta(hours=8)).timestamp())
    assert expiry_of(RequesterAssertions(KEY).vouch(user, "ses_1", now=NOW)) == NOW + DEFAULT_TTL


def test_an_assertion_ends_with_a_token_that_ends_sooner():
    user = User(sub="alice", roles=("requester",), expires_at=(NOW + timedelta(minutes=5)).timestamp())
    assert expiry_of(RequesterAssertions(KEY).vouch(user, "ses_1", now=NOW)) == NOW + timedelta(minutes=5)
