"""The gateway's requester assertion is bound to one tool call or one run, lasts its ttl (a direct call's:
seconds), but never past the signed-in token's own expiry; a session id's owner MAC survives a rotation of the
signing key while the previous key is configured."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_gateway.auth import User
from erpilot_gateway.requesters import RequesterAssertions
from erpilot_gateway.settings import GatewaySettings
from erpilot_platform.assertions import DEFAULT_TTL, TOOL_CALL_TTL
from erpilot_platform.grants import encode_signing_key, load_signing_key, new_keypair_env
from erpilot_platform.settings import ConfigurationError

pytestmark = pytest.mark.unit

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
KEY = load_signing_key(new_keypair_env("ERPILOT_ASSERTION")["ERPILOT_ASSERTION_SIGNING_KEY"])


def claims_of(token: str) -> dict:
    return jwt.decode(token, options={"verify_signature": False})


def expiry_of(token: str) -> datetime:
    return datetime.fromtimestamp(claims_of(token)["exp"], UTC)


def test_a_run_lasts_its_ttl_and_a_direct_call_seconds_while_the_token_lasts_longer():
    user = User(sub="alice", roles=("requester",), expires_at=(NOW + timedelta(hours=8)).timestamp())
    assertions = RequesterAssertions(KEY)
    assert expiry_of(assertions.for_run(user, "ses_1", "run_1", now=NOW)) == NOW + DEFAULT_TTL
    assert expiry_of(assertions.for_call(user, "ses_1", "call_1", "get_product", now=NOW)) == NOW + TOOL_CALL_TTL
    assert TOOL_CALL_TTL <= timedelta(seconds=60)


def test_an_assertion_ends_with_a_token_that_ends_sooner():
    user = User(sub="alice", roles=("requester",), expires_at=(NOW + timedelta(minutes=5)).timestamp())
    assert expiry_of(RequesterAssertions(KEY).for_run(user, "ses_1", "run_1", now=NOW)) == NOW + timedelta(minutes=5)


def test_each_assertion_names_its_purpose_and_what_it_is_bound_to():
    user = User(sub="alice", roles=("requester",), expires_at=None)
    call = claims_of(RequesterAssertions(KEY).for_call(user, "ses_1", "call_1", "get_product", now=NOW))
    run = claims_of(RequesterAssertions(KEY).for_run(user, "ses_1", "run_1", now=NOW))
    assert (call["purpose"], call["call_id"], call["tool"], "run_id" in call) == (
        "tool_call", "call_1", "get_product", False)
    assert (run["purpose"], run["run_id"], "call_id" in run) == ("run", "run_1", False)


def test_a_run_id_is_fixed_by_session_and_message_and_unpredictable_without_the_key():
    assertions = RequesterAssertions(KEY)
    run_id = assertions.run_id("ses_1", "m-1")
    assert run_id == assertions.run_id("ses_1", "m-1") and run_id.startswith("run_")
    assert len({run_id, assertions.run_id("ses_1", "m-2"), assertions.run_id("ses_2", "m-1")}) == 3
    other_key = load_signing_key(new_keypair_env("ERPILOT_ASSERTION")["ERPILOT_ASSERTION_SIGNING_KEY"])
    assert RequesterAssertions(other_key).run_id("ses_1", "m-1") != run_id


def test_the_gateway_knows_the_runs_it_started_in_a_session_by_their_id_alone():
    """A cancel's run id is the caller's word: the gateway tells its own runs (their id binds the session) from an
    unknown id or another session's run without asking the agent."""
    assertions = RequesterAssertions(KEY)
    run_id = assertions.run_id("ses_1", "m-1")
    assert re.fullmatch(r"run_[0-9a-f]{32}", run_id) and assertions.issued_run("ses_1", run_id)
    other_key = load_signing_key(new_keypair_env("ERPILOT_ASSERTION")["ERPILOT_ASSERTION_SIGNING_KEY"])
    altered = run_id[:-1] + ("0" if run_id[-1] != "0" else "1")
    for session_id, candidate in (("ses_2", run_id), ("ses_1", altered), ("ses_1", "run_" + "1" * 32),
                                  ("ses_1", RequesterAssertions(other_key).run_id("ses_1", "m-1")),
                                  ("ses_1", "run_" + run_id[4:20]), ("ses_1", "xyz_" + run_id[4:])):
        assert not assertions.issued_run(session_id, candidate), candidate


def test_after_a_key_rotation_the_sessions_made_under_the_previous_key_stay_their_owners_only_with_it():
    """A session id carries a MAC derived from the signing key it was made with: rotated without the previous key,
    every existing session is nobody's (404); with ERPILOT_ASSERTION_PREVIOUS_SIGNING_KEY it stays its owner's."""
    old, new = KEY, Ed25519PrivateKey.generate()
    made_before = RequesterAssertions(old).new_session_id("alice")

    assert RequesterAssertions(new).session_owner(made_before, "alice") is False  # no previous key: 404
    rotated = RequesterAssertions(new, previous=old)
    assert rotated.session_owner(made_before, "alice") is True
    assert rotated.session_owner(made_before, "mallory") is False
    made_after = rotated.new_session_id("bob")  # new ids are made under the new key alone
    assert (rotated.session_owner(made_after, "bob"), RequesterAssertions(old).session_owner(made_after, "bob")) == (
        True, False)


def test_the_previous_assertion_key_is_optional_and_a_bad_one_stops_start_up():
    assert GatewaySettings().previous_assertion_key() is None
    loaded = GatewaySettings(assertion_previous_signing_key=encode_signing_key(KEY)).previous_assertion_key()
    assert loaded.private_bytes_raw() == KEY.private_bytes_raw()
    with pytest.raises(ConfigurationError, match="ERPILOT_ASSERTION_PREVIOUS_SIGNING_KEY"):
        GatewaySettings(assertion_previous_signing_key="not-a-key").previous_assertion_key()
