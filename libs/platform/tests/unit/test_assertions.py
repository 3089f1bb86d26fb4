"""Requester assertions: what verifies, and each rule that refuses (every refusal names its reason)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from erpilot_platform.assertions import AssertionRefused, require_vouched, sign_assertion, verify_assertion
from erpilot_platform.refusals import InvalidMessage

pytestmark = pytest.mark.unit
KEY = Ed25519PrivateKey.generate()
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # long past: "now" is after every expiry
CALL = {"call_id": "call_1", "tool": "search_products"}  # the one call the assertions of _signed() vouch for


def _signed(**overrides) -> str:
    claims = {"sub": "alice", "roles": ["requester"], "session_id": "ses_1", "call_id": "call_1",
              "tool": "search_products", "now": NOW} | overrides
    return sign_assertion(KEY, **claims)


def test_a_signed_assertion_vouches_for_its_person_in_its_session():
    requester = verify_assertion(_signed(), KEY.public_key(), session_id="ses_1", sub="alice", **CALL,
                                 at=NOW)
    assert (requester.sub, requester.roles, requester.session_id) == ("alice", ("requester",), "ses_1")
    assert (requester.purpose, requester.call_id, requester.run_id) == ("tool_call", "call_1", None)
    assert requester.expires_at - requester.issued_at == timedelta(hours=1)


@pytest.mark.parametrize(("token", "kwargs", "reason"), [
    (None, {}, "assertion_missing"),
    ("", {}, "assertion_missing"),
    ("not.a.jws", {}, "assertion_invalid"),
    (_signed(session_id="ses_2"), {}, "assertion_session_mismatch"),
    (_signed(sub="mallory"), {"sub": "alice"}, "assertion_subject_mismatch"),
    (_signed(), {"at": NOW + timedelta(hours=2)}, "assertion_expired"),
    (_signed(), {"at": NOW - timedelta(minutes=5)}, "assertion_not_yet_valid"),
])
def test_each_rule_refuses_with_its_reason(token, kwargs, reason):
    with pytest.raises(AssertionRefused) as refused:
        verify_assertion(token, KEY.public_key(), **({"session_id": "ses_1", **CALL, "at": NOW} | kwargs))
    assert refused.value.reason == reason


def test_another_key_or_a_changed_claim_does_not_verify():
    other = Ed25519PrivateKey.generate()
    with pytest.raises(AssertionRefused, match="does not verify") as refused:
        verify_assertion(sign_assertion(other, sub="alice", roles=[], session_id="ses_1", **CALL,
                                        now=NOW), KEY.public_key(), session_id="ses_1", **CALL, at=NOW)
    assert refused.value.reason == "assertion_invalid"
    header, _, signature = _signed().split(".")
    forged_claims = jwt.utils.base64url_encode(
        b'{"sub":"victim","roles":[],"session_id":"ses_1","purpose":"tool_call","call_id":"call_1","tool":"search_products","iat":%d,"exp":%d}'
        % (int(NOW.timestamp()), int(NOW.timestamp()) + 3600)).decode()
    with pytest.raises(AssertionRefused) as refused:
        verify_assertion(f"{header}.{forged_claims}.{signature}", KEY.public_key(), session_id="ses_1",
                         **CALL, at=NOW)
    assert refused.value.reason == "assertion_invalid"


def test_an_assertion_is_checked_at_the_moment_it_was_used_not_when_a_relay_gets_to_it():
    token = _signed()
    used_at = NOW + timedelta(minutes=59)
    assert verify_assertion(token, KEY.public_key(), session_id="ses_1", **CALL, at=used_at).sub == "alice"
    with pytest.raises(AssertionRefused, match="expired"):
        verify_assertion(token, KEY.public_key(), session_id="ses_1", **CALL)  # now: long after NOW


def test_a_token_signed_with_another_algorithm_is_refused():
    hs256 = jwt.encode({"sub": "alice", "roles": [], "session_id": "ses_1", "purpose": "tool_call",
                        "call_id": "call_1", "tool": "search_products", "iat": int(NOW.timestamp()),
                        "exp": int(NOW.timestamp()) + 60}, "s" * 32, algorithm="HS256")
    with pytest.raises(AssertionRefused) as refused:
        verify_assertion(hs256, KEY.public_key(), session_id="ses_1", **CALL, at=NOW)
    assert refused.value.reason == "assertion_invalid"


def test_a_service_refuses_what_nobody_vouched_for_as_an_invalid_message_naming_the_rule():
    assert require_vouched(_signed(), KEY.public_key(), session_id="ses_1", sub="alice", **CALL,
                           at=NOW).sub == "alice"
    with pytest.raises(InvalidMessage) as refused:
        require_vouched(_signed(), KEY.public_key(), session_id="ses_1", sub="mallory", **CALL, at=NOW)
    reply = refused.value.reply()
    assert (reply.error.code, reply.error.status, reply.error.details) == (
        "invalid_message", 422, {"reason": "assertion_subject_mismatch"})


# --- issue #32: an assertion vouches for one command, not for a person in a session --------------------------
RUN_TOKEN = _signed(call_id=None, tool=None, run_id="run_7")
CANCEL_TOKEN = _signed(call_id=None, tool=None, run_id="run_7", cancel=True)
READ = "search_products"


@pytest.mark.parametrize(("token", "bound", "covered"), [
    (_signed(), {"call_id": "call_1", "tool": READ}, True),
    (_signed(), {"call_id": "call_2", "tool": READ}, False),
    # a read's assertion reused for a write (the finding), under another call id or its own
    (_signed(), {"call_id": "call_2", "tool": "adjust_stock"}, False),
    (_signed(), {"call_id": "call_1", "tool": "adjust_stock"}, False),
    (_signed(call_id="run_7"), {"run_id": "run_7"}, False),  # a tool call's assertion never stands for a run
    (_signed(call_id="run_7"), {"call_id": "run_7:call_0", "tool": READ}, False),
    (RUN_TOKEN, {"call_id": "run_7:call_0", "tool": "adjust_stock"}, True),  # a run covers its calls, any tool
    (RUN_TOKEN, {"call_id": "run_7:call_0:2", "tool": READ}, True),
    (RUN_TOKEN, {"run_id": "run_7"}, False),  # not its cancel: the agent holds a run's assertion all the run
    (CANCEL_TOKEN, {"run_id": "run_7"}, True),  # a cancel's covers that run's withdrawal
    (CANCEL_TOKEN, {"run_id": "run_8"}, False),
    # and no call: the URL's run id is the caller's word, so a cancel is no write credential (security review)
    (CANCEL_TOKEN, {"call_id": "run_7:1", "tool": "adjust_stock"}, False),
    (CANCEL_TOKEN, {"call_id": "run_7:call_0", "tool": READ}, False),
    (RUN_TOKEN, {"call_id": "run_8:call_0", "tool": READ}, False),
    (RUN_TOKEN, {"call_id": "run_70:call_0", "tool": READ}, False),  # a prefix of the run id is another run
    (RUN_TOKEN, {"call_id": "run_7", "tool": READ}, False),
    (RUN_TOKEN, {"run_id": "run_8"}, False),
])
def test_an_assertion_covers_only_its_own_call_or_its_own_runs_calls(token, bound, covered):
    verify = lambda: verify_assertion(token, KEY.public_key(), session_id="ses_1", sub="alice", at=NOW, **bound)  # noqa: E731
    if covered:
        assert verify().sub == "alice"
        return
    with pytest.raises(AssertionRefused) as refused:
        verify()
    assert refused.value.reason == "assertion_call_mismatch"


def test_a_services_refusal_of_another_calls_assertion_is_an_invalid_message_naming_the_mismatch():
    with pytest.raises(InvalidMessage) as refused:
        require_vouched(_signed(), KEY.public_key(), session_id="ses_1", sub="alice", call_id="call_2",
                        tool="search_products", at=NOW)
    assert refused.value.reply().error.details == {"reason": "assertion_call_mismatch"}


@pytest.mark.parametrize("claims", [
    {},  # an assertion of before issue #32: no purpose
    {"purpose": "tool_call"},
    {"purpose": "tool_call", "call_id": "call_1"},  # no tool
    {"purpose": "run", "call_id": "call_1", "tool": "search_products"},
    {"purpose": "anything", "call_id": "call_1", "tool": "search_products"},
    {"purpose": "tool_call", "call_id": "", "tool": "search_products"},
    {"purpose": "tool_call", "call_id": 7, "tool": "search_products"},
    {"purpose": "tool_call", "call_id": "call_1", "tool": "search_products", "args": 7},  # a malformed binding
])
def test_an_assertion_bound_to_no_call_and_no_run_does_not_verify(claims):
    token = jwt.encode({"sub": "alice", "roles": [], "session_id": "ses_1", "iat": int(NOW.timestamp()),
                        "exp": int(NOW.timestamp()) + 60} | claims, KEY, algorithm="EdDSA")
    with pytest.raises(AssertionRefused) as refused:
        verify_assertion(token, KEY.public_key(), session_id="ses_1", **CALL, at=NOW)
    assert refused.value.reason == "assertion_invalid"


def test_signing_and_verifying_name_exactly_one_of_call_and_run():
    with pytest.raises(ValueError):
        sign_assertion(KEY, sub="alice", roles=[], session_id="ses_1", now=NOW)
    with pytest.raises(ValueError):
        sign_assertion(KEY, sub="alice", roles=[], session_id="ses_1", call_id="c", tool="t", run_id="r", now=NOW)
    with pytest.raises(ValueError):
        sign_assertion(KEY, sub="alice", roles=[], session_id="ses_1", call_id="c", now=NOW)  # a call of no tool
    with pytest.raises(ValueError):
        verify_assertion(_signed(), KEY.public_key(), session_id="ses_1", at=NOW)
