"""The canonical request digest and the New / Repeat / Conflict decision every service's key uses."""

from __future__ import annotations

import json
import random
import unicodedata

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from erpilot_platform.idempotency import DIGEST_PREFIX, Decision, decide, request_digest

pytestmark = pytest.mark.unit

SAFE_INT = 2**53 - 1
scalars = (st.none() | st.booleans() | st.integers(-SAFE_INT, SAFE_INT)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
requests = st.dictionaries(st.text(max_size=8), values, max_size=6)


def reordered(value, rng: random.Random):
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: reordered(v, rng) for k, v in items}
    if isinstance(value, list):
        return [reordered(v, rng) for v in value]
    return value


def test_a_digest_is_versioned_sha256():
    digest = request_digest({"tool": "get_product", "arguments": {"sku": "SKU-1"}})

    assert digest.startswith(DIGEST_PREFIX) and len(digest) == len(DIGEST_PREFIX) + 64
    assert int(digest.removeprefix(DIGEST_PREFIX), 16) >= 0


@settings(max_examples=200, deadline=None)
@given(requests, st.randoms(use_true_random=False))
def test_key_order_does_not_change_the_digest(request, rng):
    assert request_digest(reordered(request, rng)) == request_digest(request)


@settings(max_examples=200, deadline=None)
@given(requests)
def test_the_json_spelling_that_carried_a_request_does_not_change_its_digest(request):
    escaped = json.loads(json.dumps(request, ensure_ascii=True))  # \u00e9 instead of é, and so on
    verbatim = json.loads(json.dumps(request, ensure_ascii=False, indent=2))

    assert request_digest(escaped) == request_digest(verbatim) == request_digest(request)


@pytest.mark.parametrize("spelling", ["100", "100.0", "1e2", "1.00E+2", "100.000"])
def test_a_number_s_spelling_does_not_change_the_digest(spelling):
    assert request_digest(json.loads(f'{{"qty": {spelling}}}')) == request_digest({"qty": 100})


def test_an_escaped_character_is_the_character():
    assert request_digest(json.loads('{"note": "caf\\u00e9 \\ud83d\\ude00"}')) == request_digest({"note": "café 😀"})


def test_unicode_is_not_normalised_nfc_and_nfd_are_different_requests():
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")

    assert request_digest({"note": nfc}) != request_digest({"note": nfd})


@settings(max_examples=300, deadline=None)
@given(requests, st.text(max_size=8), values)
def test_any_change_of_a_value_changes_the_digest(request, key, value):
    assume(key not in request or request[key] != value)  # another value (1 and 1.0 are one JSON number)

    assert request_digest(request | {key: value}) != request_digest(request)


@pytest.mark.parametrize("other", [
    {"arguments": {"sku": "SKU-2"}},  # another value
    {"arguments": {"sku": "SKU-1", "qty": 1}},  # one more argument
    {"arguments": {}},  # one fewer
    {"arguments": {"SKU": "SKU-1"}},  # another key
    {"arguments": {"sku": ["SKU-1"]}},  # another type
    {"arguments": {"sku": "SKU-1 "}},
])
def test_each_kind_of_argument_change_changes_the_digest(other):
    base = {"tool": "get_product", "arguments": {"sku": "SKU-1"}}

    assert request_digest(base | other) != request_digest(base)


@pytest.mark.parametrize("bad", [{"n": 2**53}, {"n": float("nan")}, {"n": float("inf")}])
def test_what_rfc_8785_cannot_represent_is_refused(bad):
    with pytest.raises(ValueError):
        request_digest(bad)


def test_nothing_stored_is_new():
    assert decide(None, request_digest({"a": 1})) is Decision.NEW


def test_the_same_digest_is_a_repeat_and_another_a_conflict():
    stored = request_digest({"a": 1})

    assert decide(stored, request_digest({"a": 1})) is Decision.REPEAT
    assert decide(stored, request_digest({"a": 2})) is Decision.CONFLICT


def test_a_legacy_value_is_a_repeat_when_it_is_the_legacy_digest_of_the_new_request():
    assert decide("abc123", request_digest({"a": 1}), legacy=lambda: "abc123") is Decision.REPEAT
    assert decide("sha256:abc", request_digest({"a": 1}), legacy=lambda: "sha256:abc") is Decision.REPEAT
    assert decide("abc123", request_digest({"a": 1}), legacy=lambda: "abc999") is Decision.CONFLICT
    assert decide("abc123", request_digest({"a": 1})) is Decision.CONFLICT  # no legacy form known


def test_a_versioned_stored_value_is_never_compared_with_the_legacy_form():
    asked = []

    def legacy() -> str:
        asked.append(True)
        return "v2:sha256:x"

    assert decide("v2:sha256:x", request_digest({"a": 1}), legacy=legacy) is Decision.CONFLICT
    assert decide(request_digest({"a": 1}), request_digest({"a": 1}), legacy=legacy) is Decision.REPEAT
    assert asked == []
