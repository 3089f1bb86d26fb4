"""Property: only the three exact action strings and the exact fingerprint ever make a new decision."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from erpilot_approval.domain.approvals import (
    ACTION_STATUS,
    ApprovalError,
    ApprovalRequest,
    PendingApproval,
    decide,
    new_pending,
)
from erpilot_approval.domain.policy import load_policy
from erpilot_contracts.fingerprint import fingerprint as compute_fingerprint
from erpilot_platform.testing.previews import preview_json

pytestmark = pytest.mark.unit

ARGUMENTS = {"draft_id": "D-1", "revision": 2}
PENDING = new_pending(
    ApprovalRequest(
        call_id="c", session_id="s", tool="submit_order", tool_schema_version=1, arguments=ARGUMENTS,
        fingerprint=compute_fingerprint("submit_order", 1, ARGUMENTS), operation_id="op",
        preview=preview_json(amount_minor=100), requested_by="alice",
    ),
    load_policy(None), datetime(2026, 1, 1, tzinfo=UTC), "pa",
)


class EqualsEverything:
    """Claims to equal anything, the way a careless `==` check would be fooled."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


class SneakyStr(str):
    """A str subclass equal to the real value; the contracts only ever send a plain str."""


def near_misses(exact: str) -> st.SearchStrategy[object]:
    """Values that resemble ``exact`` without being it."""
    last = "0" if exact[-1] != "0" else "1"
    lookalikes = st.sampled_from([
        exact.upper(), exact.title(), " " + exact, exact + " ", exact + "\n", exact + "\x00", exact[:-1],
        exact[:-1] + last, exact + "d", exact.encode(), (exact,), {exact: exact},
    ])
    # Built, not sampled: hypothesis itself compares sampled values, which EqualsEverything would fool.
    return st.one_of(lookalikes, st.builds(SneakyStr, st.just(exact)), st.builds(EqualsEverything))


ANYTHING = st.one_of(
    st.text(), st.binary(), st.integers(), st.floats(allow_nan=True), st.booleans(), st.none(),
    st.lists(st.text(max_size=8), max_size=3),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
)
EXACT_ACTIONS = st.sampled_from(sorted(ACTION_STATUS))


def is_new_decision(approval: PendingApproval, action: object, fingerprint: object) -> bool:
    """Whether ``decide`` records a new decision (an ApprovalError or a repeat is not one)."""
    try:
        outcome = decide(approval, action, fingerprint, "bob", ["approver"], None,
                         approval.created_at + timedelta(seconds=1))
    except ApprovalError:
        return False
    return outcome.is_new


@example(action=SneakyStr("approve"))
@example(action=EqualsEverything())
@given(action=st.one_of(EXACT_ACTIONS, ANYTHING, *(near_misses(a) for a in ACTION_STATUS)))
def test_only_an_exact_action_string_decides(action: object) -> None:
    exact = type(action) is str and action in ACTION_STATUS
    assert is_new_decision(PENDING, action, PENDING.fingerprint) is exact


@example(action="approve", fingerprint=SneakyStr(PENDING.fingerprint))
@example(action="approve", fingerprint=EqualsEverything())
@given(action=EXACT_ACTIONS, fingerprint=st.one_of(st.just(PENDING.fingerprint), ANYTHING,
                                                    near_misses(PENDING.fingerprint)))
def test_only_the_exact_fingerprint_decides(action: str, fingerprint: object) -> None:
    exact = type(fingerprint) is str and fingerprint == PENDING.fingerprint
    assert is_new_decision(PENDING, action, fingerprint) is exact


@given(
    action=st.one_of(ANYTHING, near_misses("approve")),
    fingerprint=st.one_of(ANYTHING, near_misses(PENDING.fingerprint)),
)
def test_garbage_in_both_never_decides(action: object, fingerprint: object) -> None:
    assert not is_new_decision(PENDING, action, fingerprint)
