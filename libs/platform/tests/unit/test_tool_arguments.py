"""One mapping of unusable tool arguments to codes, the same in every service (SPEC §2)."""

from __future__ import annotations

import pytest

from erpilot_platform.refusals import Refused
from erpilot_platform.tool_arguments import normalised_arguments

pytestmark = pytest.mark.unit


def test_known_tool_and_valid_arguments_come_back_normalised() -> None:
    assert normalised_arguments("cancel_order", {"order_id": "O-1", "reason": None}) == {"order_id": "O-1"}


@pytest.mark.parametrize(("tool", "arguments", "code"), [
    ("launch_rocket", {}, "unknown_tool"),  # never policy_denied: that is the policy's answer to a known tool
    ("submit_order", {"draft_id": "D-1", "revision": "2"}, "invalid_arguments"),
    ("submit_order", {"draft_id": "D-1", "revision": 2, "extra": 1}, "invalid_arguments"),
    ("submit_order", ["D-1", 2], "invalid_arguments"),
    ("adjust_stock", {"sku": "S", "delta": 1, "reason": "a\u0000b"}, "invalid_arguments"),
])
def test_unusable_arguments_are_refused_with_one_422_code(tool, arguments, code) -> None:
    with pytest.raises(Refused) as refused:
        normalised_arguments(tool, arguments)
    assert (refused.value.code, refused.value.status) == (code, 422)


def test_invalid_arguments_say_what_is_wrong() -> None:
    with pytest.raises(Refused) as refused:
        normalised_arguments("submit_order", {"draft_id": "D-1"})
    assert refused.value.reply().error.details["errors"][0]["loc"] == ["revision"]
