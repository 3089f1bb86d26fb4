"""Erpilot's gateway: the HTTP API, the web console and MCP, in front of the services it reaches over NATS.

Its layers (services/gateway/tests/unit/test_layer_imports.py keeps them):

- edges: ``routes/`` (the HTTP API of SPEC §5), ``console/`` (the HTML pages) and ``mcp_server/`` (MCP) turn a
  request into contract messages for the person the token names (``auth``) and answer from the typed replies.
  They never import each other; what several of them need sits beside them: ``tool_calls`` (the tool-call
  pipeline), ``catalogue`` (tools with the policy in force), ``sse`` (the event stream), ``bodies`` (strict HTTP
  bodies), ``problems`` (problem+json);
- the port: ``services.Services``, the one way to the other services (typed requests, the requester assertion,
  a session's events, readiness), with its NATS side in ``session_watch``; every failure comes out of it as a
  ``Problem``;
- ``erpilot_contracts`` below both; ``app`` composes them (the only other module that touches the broker).
"""
