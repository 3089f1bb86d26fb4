"""One handler shape in every service: each entrypoint is a table ``{endpoint or event: handler}`` registered in a
loop (``ServiceBus.register``), and every handler is ``async def handle(msg: XV1, deps: Deps) -> YV1`` where
``XV1`` is what its endpoint declares it receives and ``YV1`` what it declares it answers (None for an event)."""

from __future__ import annotations

import inspect
import typing

import pytest

from erpilot_agent.entrypoints import nats as agent_entry
from erpilot_approval.entrypoints import nats as approval_entry
from erpilot_approval.entrypoints import webhooks as webhook_entry
from erpilot_contracts import events, requests
from erpilot_erp.entrypoints import nats as erp_entry

pytestmark = pytest.mark.unit

TABLES = {"agent": agent_entry.HANDLERS, "approval": approval_entry.HANDLERS,
          "approval webhooks": webhook_entry.HANDLERS, "erp": erp_entry.HANDLERS}
HANDLERS = [(name, key, handler) for name, table in TABLES.items() for key, handler in table.items()]


def _declared(key: requests.Endpoint | events.Event) -> tuple[type, type | None]:
    if isinstance(key, events.Event):
        return key.model, None
    return key.request, key.reply


@pytest.mark.parametrize(("service", "key", "handler"), HANDLERS,
                         ids=[f"{service}:{key.subject}" for service, key, _ in HANDLERS])
def test_each_handler_takes_its_message_and_deps_and_answers_its_declared_reply(service, key, handler):
    assert inspect.iscoroutinefunction(handler), f"{handler.__qualname__} is not async"
    parameters = list(inspect.signature(handler).parameters.values())
    required = [p for p in parameters if p.default is inspect.Parameter.empty]
    assert len(required) == 2, f"{handler.__qualname__}: (msg, deps) and nothing else required"
    hints = typing.get_type_hints(handler)
    message, reply = _declared(key)
    assert hints[required[0].name] is message, f"{handler.__qualname__} does not take {message.__name__}"
    assert hints["return"] is (type(None) if reply is None else reply), \
        f"{handler.__qualname__} does not answer {getattr(reply, '__name__', None)}"
    assert inspect.getdoc(handler), f"{handler.__qualname__}: its docstring describes the endpoint (AsyncAPI)"


def test_every_declared_request_endpoint_has_one_handler():
    served = [key for table in TABLES.values() for key in table if isinstance(key, requests.Endpoint)]
    assert sorted(e.subject for e in served) == sorted(e.subject for e in requests.ALL)
