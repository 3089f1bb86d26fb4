"""Hostile JSON is refused with the code SPEC §9 names, and nothing else is (``json_input``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from erpilot_contracts import json_input
from erpilot_contracts.json_input import CanonicalArguments
from erpilot_contracts.tools.v1 import InvalidArguments, normalise

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("raw", [
    b'{"tool": "search_products", "tool": "submit_order"}',  # duplicate keys read differently elsewhere
    b'{"a": {"b": 1, "b": 1}}',
    b'{"a": NaN}', b'{"a": -Infinity}',
    b'{"a": "\\ud800"}', b'{"\\udfff": 1}', b'["\\ud83d"]',  # lone surrogates (a pair is fine, below)
    b"[" * 65 + b"]" * 65,
    b"[" * 200_000 + b"]" * 200_000,  # json.loads alone raises RecursionError here
    b'{"a": 1,}', b"{} x", b"", b"\xff\xfe", b'{"a": "\xc3"}',
])
def test_malformed_json_is_invalid_json(raw: bytes) -> None:
    with pytest.raises(json_input.InvalidJson) as refused:
        json_input.loads(raw)
    assert (refused.value.code, refused.value.status) == ("invalid_json", 400)


@pytest.mark.parametrize("raw", [
    b'{"a": 9223372036854775808}', b'{"a": -9223372036854775809}', b"[" + b"9" * 10_000 + b"]",
    b'{"a": 1e400}', b'{"a": "x\\u0000y"}', b'{"a\\u0000": 1}', b'[[{"note": "\\u0000"}]]',
])
def test_unstorable_values_are_invalid_arguments(raw: bytes) -> None:
    with pytest.raises(json_input.InvalidValue) as refused:
        json_input.loads(raw)
    assert (refused.value.code, refused.value.status) == ("invalid_arguments", 422)


@pytest.mark.parametrize(("raw", "value"), [
    (b'{"a": 9223372036854775807, "b": -9223372036854775808}', {"a": 2**63 - 1, "b": -(2**63)}),
    (b'{"s": "\\ud83d\\ude00 caf\xc3\xa9"}', {"s": "\U0001F600 café"}),
    (b"[" * 64 + b"]" * 64, json.loads("[" * 64 + "]" * 64)),
    (b'{"x": 1.5e300, "y": null, "z": true}', {"x": 1.5e300, "y": None, "z": True}),
])
def test_ordinary_json_passes_unchanged(raw: bytes, value) -> None:
    assert json_input.loads(raw) == value


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text().filter(
    lambda t: "\x00" not in t) | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text().filter(lambda t: "\x00" not in t),
                                                                inner, max_size=3), max_leaves=8))
def test_whatever_json_dumps_writes_without_hostile_values_is_read_back(value) -> None:
    assert json_input.loads(json.dumps(value).encode()) == value


class _Args(BaseModel):
    arguments: CanonicalArguments


@pytest.mark.parametrize("arguments", [{"qty": 2**53}, {"lines": [{"qty": -(2**53)}]}, {"n": "\x00"}])
def test_fingerprinted_arguments_hold_no_integer_beyond_2_53_and_no_nul(arguments) -> None:
    with pytest.raises(ValidationError):
        _Args(arguments=arguments)
    assert _Args(arguments={"qty": 2**53 - 1}).arguments == {"qty": 2**53 - 1}


@pytest.mark.parametrize(("tool", "arguments"), [
    ("refund_payment", {"order_id": "O-1", "amount_minor": 2**53, "currency": "EUR", "channel": "original"}),
    ("get_draft", {"draft_id": "D-1", "revision": 2**60}),
    ("cancel_order", {"order_id": "O-1", "reason": "bad\x00reason"}),
])
def test_the_tool_catalog_refuses_what_cannot_be_fingerprinted_or_stored(tool, arguments) -> None:
    with pytest.raises(InvalidArguments):
        normalise(tool, arguments)


@pytest.mark.parametrize("session_id", ["*", ">", "a.b", "ses 1", "", "x" * 101])
def test_a_session_id_is_one_token_of_its_events_subject(session_id):
    from pydantic import ValidationError

    from erpilot_contracts.agent.v1 import CreateSessionV1
    from erpilot_contracts.subjects import session_events_subject

    with pytest.raises(ValidationError):  # a session "a.b" would publish where no stream listens: a stuck relay
        CreateSessionV1(session_id=session_id, owner="alice")
    with pytest.raises(ValueError):
        session_events_subject(session_id)
    assert session_events_subject("ses_0a-b") == "erpilot.v1.sessions.ses_0a-b.events"
