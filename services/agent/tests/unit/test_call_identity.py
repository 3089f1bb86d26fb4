"""The derived identity of a tool call: stable, per session, and never shared by two different pairs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from erpilot_agent.domain.call_identity import call_key, operation_id_for

pytestmark = pytest.mark.unit
ids = st.text(alphabet="abcAB019_.:-", min_size=1, max_size=100)


def test_a_key_is_stable_and_fits_its_columns():
    key = call_key("ses_1", "call_1")
    assert key == call_key("ses_1", "call_1") and key.startswith("tc_") and len(key) <= 80
    assert operation_id_for(key) == operation_id_for(key) and len(operation_id_for(key)) <= 100


def test_the_same_call_id_in_another_session_is_another_call():
    assert call_key("ses_a", "c-1") != call_key("ses_b", "c-1")
    assert operation_id_for(call_key("ses_a", "c-1")) != operation_id_for(call_key("ses_b", "c-1"))


def test_separators_inside_ids_cannot_make_two_pairs_meet():
    assert call_key("a:b", "c") != call_key("a", "b:c")
    assert call_key("1:a", "b") != call_key("1", "a:b")


@given(ids, ids, ids, ids)
def test_different_pairs_have_different_keys(s1, c1, s2, c2):
    assert (call_key(s1, c1) == call_key(s2, c2)) == ((s1, c1) == (s2, c2))
