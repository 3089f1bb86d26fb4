"""The derived identity of a tool call: stable, per session, and never shared by two different pairs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from erpilot_agent.domain.call_identity import call_key, operation_id_for
from erpilot_contracts.agent.v1 import PostMessageV1, StartToolCallV1
from erpilot_contracts.erp.v1 import UpdateProductV1

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


@pytest.mark.parametrize(("model", "fields", "missing"), [
    (StartToolCallV1, {"session_id": "s", "owner": "o", "tool": "get_product", "arguments": {}}, "call_id"),
    (PostMessageV1, {"session_id": "s", "owner": "o", "text": "hi"}, "message_id"),
    (UpdateProductV1, {"sku": "SKU-1", "price_minor": 1, "updated_by": "admin"}, "request_id"),
])
def test_a_command_without_the_id_fixed_before_publishing_is_not_a_valid_message(model, fields, missing):
    """Without it a handler could only make one up per delivery, and a redelivery would be a second request."""
    with pytest.raises(ValidationError) as refused:
        model.model_validate(fields)
    assert [e["loc"] for e in refused.value.errors()] == [(missing,)]
    assert model.model_validate({**fields, missing: "id-1"})
