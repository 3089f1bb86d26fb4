"""The gateway's layers (ARCHITECTURE, "The gateway's layers"): edges → the services port → contracts.

- The edges, ``routes/`` (HTTP API), ``console/`` (HTML pages) and ``mcp_server/`` (MCP), translate a request into
  contract messages and ask ``Services``; what more than one of them needs lives beside them at the package root
  (``tool_calls``, ``catalogue``, ``sse``, ``bodies``, ``auth``, ``problems``), never in another edge.
- The port, ``services.py`` with its NATS side ``session_watch.py``, is the only code that reaches the broker
  (with ``app.py``, the composition root that builds it); it knows no edge and nothing the edges share.
- Nothing in the gateway touches a database.
"""

from __future__ import annotations

import pytest

import erpilot_gateway
from erpilot_platform.testing.imports import imports_of, offending

pytestmark = pytest.mark.unit

EDGES = {"routes/": "erpilot_gateway.routes", "console/": "erpilot_gateway.console",
         "mcp_server/": "erpilot_gateway.mcp_server"}
PORT = ("services.py", "session_watch.py")
MESSAGING = ("faststream", "nats", "erpilot_platform.broker", "erpilot_platform.runtime", "erpilot_platform.jetstream",
             "erpilot_platform.endpoints")
DATABASE = ("sqlalchemy", "asyncpg", "alembic", "erpilot_platform.db", "erpilot_platform.uow",
            "erpilot_platform.outbox", "erpilot_platform.inbox")
SHARED_BY_EDGES = ("erpilot_gateway.tool_calls", "erpilot_gateway.catalogue", "erpilot_gateway.sse",
                   "erpilot_gateway.bodies", "erpilot_gateway.summaries")


def _everything_but(*kept: str) -> list[str]:
    return [name for name in imports_of(erpilot_gateway, recursive=True) if not kept or not name.startswith(kept)]


def test_only_the_port_and_the_composition_root_reach_the_broker():
    assert offending(erpilot_gateway, MESSAGING, only=_everything_but(*PORT, "app.py")) == {}


def test_each_edge_asks_through_the_port_and_never_through_another_edge():
    for edge in EDGES:
        others = [package for prefix, package in EDGES.items() if prefix != edge]
        assert offending(erpilot_gateway, [*others, "erpilot_gateway.session_watch", "erpilot_gateway.app"],
                         only=[edge]) == {}, edge


def test_what_the_edges_share_knows_no_edge():
    assert offending(erpilot_gateway, EDGES.values(),
                     only=[module.rsplit(".", 1)[1] + ".py" for module in SHARED_BY_EDGES]) == {}


def test_the_port_knows_no_edge_and_nothing_the_edges_share():
    assert offending(erpilot_gateway, [*EDGES.values(), *SHARED_BY_EDGES, "erpilot_gateway.app"],
                     only=PORT) == {}


def test_nothing_in_the_gateway_touches_a_database():
    assert offending(erpilot_gateway, DATABASE) == {}


def test_every_file_of_the_gateway_is_looked_at():
    looked_at = _everything_but()
    assert {"app.py", "services.py", "routes/sessions.py", "console/approval_page.py",
            "mcp_server/gateway_tools.py"} <= set(looked_at)
