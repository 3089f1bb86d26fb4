"""One mapping of unusable tool arguments to codes, the same in every service (SPEC §2)."""

from __future__ import annotations

import pytest

from erpilot_platform.tool_arguments import normalised_or_refusal


def test_known_tool_and_valid_arguments_come_back_normalised() -> None:
    assert normalised_or_refusal("cancel_order", {"order_id": "O-1", "reason": None}) == {"order_id": "O-1"}


@pytest.mark.parametrize(("tool", "arguments", "code"), [
    ("launch_rocket", {}, "unknown_tool"),  # never policy_denied: that is the policy's answer to a known tool
    ("submit_order", {"draft_id": "D-1", "revision": "2"}, "invalid_arguments"),
    ("submit_order", {"draft_id": "D-1", "revision": 2, "extra": 1}, "invalid_arguments"),
    ("submit_order", ["D-1", 2], "invalid_arguments"),
    ("adjust_stock", {"sku": "S", "delta": 1, "reason": "a\u0000b"}, "invalid_arguments"),
])
def test_unusable_arguments_are_one_422_code(tool, arguments, code) -> None:
    reply = normalised_or_refusal(tool, arguments)
    assert (reply.ok, reply.error.code, reply.error.status) == (False, code, 422)


def test_invalid_arguments_say_what_is_wrong() -> None:
    reply = normalised_or_refusal("submit_order", {"draft_id": "D-1"})
    assert reply.error.details["errors"][0]["loc"] == ["revision"]
