"""What a handler answers is its contract model (issue 33): the ServiceBus wraps it in ``ReplyV1.success``, passes a
``ReplyV1`` on as it is, sends nothing for an event's None, and refuses to guess a JSON form for anything else."""

from __future__ import annotations

import pytest

from erpilot_contracts.agent.v1 import SessionRefV1
from erpilot_contracts.base import ReplyV1
from erpilot_platform.endpoints import _as_reply

pytestmark = pytest.mark.unit


def test_a_model_is_answered_as_its_success_and_a_reply_as_it_is():
    assert _as_reply(SessionRefV1(session_id="s-1")) == ReplyV1.success(SessionRefV1(session_id="s-1")).model_dump(
        mode="json")
    refusal = ReplyV1.failure("not_found", "no such session", 404)
    assert _as_reply(refusal) == refusal.model_dump(mode="json")
    assert _as_reply(None) is None


@pytest.mark.parametrize("loose", [{"session_id": "s-1"}, ["s-1"], "s-1"])
def test_anything_but_a_model_is_a_bug(loose):
    with pytest.raises(TypeError, match="not a contract model"):
        _as_reply(loose)
