"""The agent's policy cache (``adapters.downstream.Downstream``): asked once, again when it is older than
its max age or when an approval shows another policy version; a tool the list lacks is asked for."""

from __future__ import annotations

import pytest

from erpilot_agent.adapters.downstream import Downstream
from erpilot_contracts.approval.v1 import PolicyQueryV1, PolicyViewV1, ToolPolicyV1

pytestmark = pytest.mark.unit


class CountingDownstream(Downstream):
    """Answers the policy query itself (no broker) and counts the questions."""

    def __init__(self, **kwargs):
        super().__init__(broker=None, **kwargs)
        self.version = "sha256:one"
        self.questions: list[PolicyQueryV1] = []

    async def _call(self, endpoint, payload):
        self.questions.append(payload)
        tools = [payload.tool] if payload.tool else ["get_product"]
        return PolicyViewV1(version=self.version, tools=[
            ToolPolicyV1(tool=tool, action="allow" if tool == "get_product" else "deny", roles=[], ttl_seconds=900)
            for tool in tools])


async def test_the_policy_is_asked_once_for_every_tool():
    downstream = CountingDownstream()

    first = await downstream.policy("get_product")
    again = await downstream.policy("get_product")

    assert first == again and first.action == "allow"
    assert len(downstream.questions) == 1


async def test_an_approval_under_another_policy_version_makes_it_ask_again():
    downstream = CountingDownstream()
    await downstream.policy("get_product")

    downstream.policy_version_seen("sha256:one")  # the version it has: nothing to do
    await downstream.policy("get_product")
    downstream.version = "sha256:two"
    downstream.policy_version_seen("sha256:two")
    await downstream.policy("get_product")

    assert len(downstream.questions) == 2
    assert (await downstream.policy_view()).version == "sha256:two"


async def test_a_policy_older_than_its_max_age_is_asked_again():
    downstream = CountingDownstream(policy_max_age=-1.0)  # always too old

    await downstream.policy("get_product")
    await downstream.policy("get_product")

    assert len(downstream.questions) == 2


async def test_a_tool_the_list_lacks_is_asked_for_by_name():
    downstream = CountingDownstream()

    policy = await downstream.policy("launch_rocket")

    assert policy.action == "deny"
    assert [q.tool for q in downstream.questions] == [None, "launch_rocket"]
