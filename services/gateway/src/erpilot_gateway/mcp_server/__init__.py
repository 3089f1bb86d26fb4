"""MCP endpoint (SPEC §9): the gated tools for external agents over Streamable HTTP (``/mcp``) and stdio."""
