"""Every command and query a service subscribes to is declared once in ``erpilot_contracts.requests``, with
the request model its handler parses, so a caller's ``call(broker, endpoint, request)`` sends what the
handler reads. (That the handler answers the declared reply model needs a running service: the services'
integration tests and the end-to-end tests parse those replies through the same declarations.)
"""

from __future__ import annotations

import typing
from collections import Counter
from typing import Any

import pytest
from pydantic import ConfigDict, RootModel

from erpilot import asyncapi
from erpilot_contracts import requests
from erpilot_contracts.agent.v1 import GetSessionV1, SessionRefV1
from erpilot_contracts.base import Message
from erpilot_contracts.erp.v1 import ErpViewResultV1
from erpilot_contracts.subjects import ping_subject

pytestmark = pytest.mark.unit


def _handled() -> dict[str, type]:
    """Each command and query subject the services subscribe to, with the model its entry parses."""
    handled: dict[str, type] = {}
    for app in asyncapi.services():
        for subscriber in app.broker.subscribers:
            subject = subscriber._resolved_subject_string
            if not any(kind in subject for kind in (".cmd.", ".req.", ".query.")) or subject == ping_subject(app.name):
                continue  # events have no reply; readiness pings are answered on a subject per service
            # The ServiceBus documents the model on its entry's ``body`` (erpilot_platform.endpoints._documented).
            entry = subscriber.calls[0].handler._original_call
            handled[subject] = typing.get_args(entry.__annotations__["body"])[0]
    return handled


def test_each_request_subject_is_declared_exactly_once():
    counts = Counter(endpoint.subject for endpoint in requests.ALL)
    assert [subject for subject, count in counts.items() if count > 1] == []


def test_every_subscribed_command_and_query_has_a_declaration_and_nothing_else_does():
    assert {endpoint.subject for endpoint in requests.ALL} == set(_handled())


def test_each_declaration_names_the_model_its_handler_parses():
    handled = _handled()
    mismatched = {e.subject: (e.request.__name__, handled[e.subject].__name__)
                  for e in requests.ALL if e.request is not handled[e.subject]}
    assert mismatched == {}


def test_a_declarations_durability_is_its_subjects_kind():
    assert all((".cmd." in e.subject) == e.durable for e in requests.ALL)
    assert all((".req." in e.subject) == e.retried for e in requests.ALL)


def test_a_retried_command_is_declared_on_a_req_subject_only():
    with pytest.raises(ValueError, match="not a retried command subject"):
        requests.retried("erpilot.v1.cmd.agent.tool_call", requests.AGENT_TOOL_CALL.request,
                         requests.AGENT_TOOL_CALL.reply)


def test_every_endpoint_answers_a_reply_model_of_its_own():
    assert len(requests.ALL) >= 22 and [e.subject for e in requests.ALL if not requests.typed_reply(e.reply)] == []


class _Bag(RootModel[dict[str, Any]]):
    """A reply's ``data`` as a bare JSON object: what an untyped endpoint used to declare."""


class _Nothing(Message):
    """A message with no field of its own."""


class _Open(Message):
    model_config = ConfigDict(extra="allow")
    run_id: str


class _Either(RootModel[SessionRefV1 | _Bag]):
    """A root that is a typed model or a bare object."""


@pytest.mark.parametrize("untyped", [_Bag, _Nothing, _Open, _Either, dict])
def test_an_endpoint_with_an_untyped_reply_cannot_be_declared(untyped):
    assert not requests.typed_reply(untyped)
    with pytest.raises(TypeError, match="not a model of its own"):
        requests.query("erpilot.v1.query.test.untyped", GetSessionV1, untyped)


def test_a_root_over_typed_models_is_typed():
    assert requests.typed_reply(ErpViewResultV1) and requests.typed_reply(SessionRefV1)
