"""The pure helpers of the service layer and adapters: argument checks, edit ids, role predicates."""

from __future__ import annotations

import pytest

from erpilot_approval.adapters.tables import ROLES, role_predicate
from erpilot_approval.domain.edits import edited_operation_id
from erpilot_approval.domain.policy_values import ROLES as POLICY_ROLES
from erpilot_approval.service_layer.requests import check_arguments
from erpilot_platform.refusals import Refused

pytestmark = pytest.mark.unit


def test_only_normalised_arguments_of_a_known_tool_version_pass() -> None:
    check_arguments("submit_order", 1, {"draft_id": "D-1", "revision": 2})
    cases = [
        (("submit_order", 1, {"draft_id": "D-1", "revision": 2.0}), "invalid_arguments", 422),
        (("submit_order", 1, {"draft_id": "D-1", "revision": 2, "x": 1}), "invalid_arguments", 422),
        (("cancel_order", 1, {"order_id": "O-1", "reason": None}), "invalid_arguments", 422),  # not normalised
        (("submit_order", 2, {"draft_id": "D-1", "revision": 2}), "invalid_request", 422),
        (("rm_rf", 1, {}), "unknown_tool", 422),  # SPEC §2, as the agent and the ERP answer it
    ]
    for args, code, status in cases:
        with pytest.raises(Refused) as refused:
            check_arguments(*args)
        assert (refused.value.code, refused.value.status) == (code, status), args


def test_an_edit_of_one_version_to_the_same_arguments_always_names_the_same_operation() -> None:
    first = edited_operation_id("pa_1", "sha256:aa")
    assert first == edited_operation_id("pa_1", "sha256:aa") and first.startswith("op_") and len(first) == 35
    assert len({first, edited_operation_id("pa_2", "sha256:aa"), edited_operation_id("pa_1", "sha256:ab")}) == 3


def test_role_predicates_exist_only_for_the_closed_set_of_roles() -> None:
    assert ROLES == POLICY_ROLES  # one partial list index per role the policy knows
    assert role_predicate("manager") == "required_roles @> ARRAY['manager']::varchar(20)[]"
    with pytest.raises(ValueError):
        role_predicate("manager'] OR true --")
