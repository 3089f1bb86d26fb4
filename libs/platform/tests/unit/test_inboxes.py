"""Issue 32: the gateway's requests to the agent wait for their answers on a connection apart, and every inbox prefix
carries a random token, so the agent neither reaches nor guesses the inboxes of the gateway's other requests."""

from __future__ import annotations

import pytest
from faststream.nats import NatsBroker

from erpilot_contracts import subjects
from erpilot_platform.broker import SplitInboxBroker, answering_service, create_broker, inbox_root

pytestmark = pytest.mark.unit

URL = "nats://127.0.0.1:4222"  # nothing connects


def prefix(broker: NatsBroker) -> str:
    return broker._connection_kwargs["inbox_prefix"]


def test_the_gateway_asks_the_agent_on_a_connection_whose_inboxes_are_apart():
    gateway = create_broker(URL, "gateway")

    assert isinstance(gateway, SplitInboxBroker) and set(gateway.apart) == {"agent"}
    assert prefix(gateway).startswith(inbox_root("gateway") + ".")
    assert prefix(gateway.apart["agent"]).startswith(inbox_root("gateway", "agent") + ".")
    assert not prefix(gateway.apart["agent"]).startswith(inbox_root("gateway") + ".")


@pytest.mark.parametrize("service", ["gateway", "agent", "approval", "erp"])
def test_every_connection_has_an_unguessable_inbox_prefix(service):
    first, second = prefix(create_broker(URL, service)), prefix(create_broker(URL, service))

    assert first != second
    assert first.startswith(f"{inbox_root(service)}.") and len(first.rsplit(".", 1)[1]) == 32


def test_only_the_gateway_has_a_connection_apart():
    for service in ("agent", "approval", "erp"):
        assert not isinstance(create_broker(URL, service), SplitInboxBroker), service


def test_the_answering_service_is_the_subjects_fourth_token():
    assert answering_service(subjects.AGENT_REQ_TOOL_CALL) == "agent"
    assert answering_service(subjects.AGENT_QUERY_SESSION) == "agent"
    assert answering_service(subjects.ping_subject("agent")) == "agent"
    assert answering_service(subjects.APPROVAL_REQ_DECIDE) == "approval"
    assert answering_service(subjects.session_events_subject("ses_1")) is None
    assert answering_service("elsewhere.v1.cmd.agent.x") is None


async def test_requests_to_the_agent_go_out_on_the_connection_apart_and_the_others_on_the_gateways(monkeypatch):
    gateway = create_broker(URL, "gateway")
    sent: list[tuple[str, str]] = []

    async def main_request(self, message, subject, *args, **kwargs):
        sent.append(("main" if self is gateway else "apart" if self is gateway.apart["agent"] else "?", subject))

    monkeypatch.setattr(NatsBroker, "request", main_request)

    for subject in (subjects.AGENT_REQ_TOOL_CALL, subjects.AGENT_QUERY_SESSION, subjects.ping_subject("agent"),
                    subjects.APPROVAL_REQ_DECIDE, subjects.APPROVAL_QUERY_GET, subjects.ERP_QUERY_VIEW):
        await gateway.request({}, subject, stream=None, timeout=1.0)

    assert sent == [("apart", subjects.AGENT_REQ_TOOL_CALL), ("apart", subjects.AGENT_QUERY_SESSION),
                    ("apart", subjects.ping_subject("agent")), ("main", subjects.APPROVAL_REQ_DECIDE),
                    ("main", subjects.APPROVAL_QUERY_GET), ("main", subjects.ERP_QUERY_VIEW)]
