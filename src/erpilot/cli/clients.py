"""`erpilot mcp --stdio` and `erpilot docs`: for the clients of a deployment, an MCP server over stdio that talks
to the gateway (``erpilot.mcp_stdio``), and the AsyncAPI document of the NATS interface (``erpilot.asyncapi``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path


def cmd_mcp(args: argparse.Namespace) -> None:
    """Serve MCP on stdin/stdout for one token, as a client of the gateway at ERPILOT_URL (nothing else needed)."""
    import asyncio
    import logging

    from erpilot.mcp_stdio import GatewayRefused, serve_stdio
    from erpilot_platform.logs import configure_logging

    if not args.stdio:
        sys.exit("erpilot mcp: only --stdio is served here; Streamable HTTP is at /mcp of the gateway")
    url = args.url or os.environ.get("ERPILOT_URL")
    if not url:
        sys.exit("erpilot mcp: set ERPILOT_URL (or pass --url) to the gateway's URL, e.g. http://127.0.0.1:8000")
    token = bearer_token(args, os.environ)
    configure_logging("mcp-stdio", os.environ.get("ERPILOT_LOG_LEVEL", "INFO"))  # stderr: stdout carries MCP
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request would drown the rest
    try:
        asyncio.run(serve_stdio(url, token))
    except GatewayRefused as exc:
        sys.exit(f"erpilot mcp: {exc}")


def bearer_token(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The token from ``--token-file`` (its first line), else ``ERPILOT_TOKEN``; exits saying what to fix.

    Never from the command line: any local user reads a process's arguments (``ps``, ``/proc/<pid>/cmdline``),
    while its environment and a file of mode 0600 stay its owner's. ``--token`` is refused, not used.
    """
    if args.token is not None:
        sys.exit("erpilot mcp: --token is no longer taken (a command line shows in `ps`); put the token in "
                 "ERPILOT_TOKEN or in a file named by --token-file")
    if args.token_file is not None:
        try:
            lines = Path(args.token_file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            sys.exit(f"erpilot mcp: cannot read --token-file {args.token_file}: {exc}")
        token = lines[0].strip() if lines else ""
        if not token:
            sys.exit(f"erpilot mcp: --token-file {args.token_file} is empty")
        return token
    token = environ.get("ERPILOT_TOKEN", "").strip()
    if not token:
        sys.exit("erpilot mcp: set ERPILOT_TOKEN (or pass --token-file) to a bearer token with the requester role "
                 "(`erpilot token --sub you --role requester`)")
    return token


def cmd_docs(args: argparse.Namespace) -> None:
    """Print, write (--out) or serve (--serve PORT) the AsyncAPI document of the NATS interface."""
    from erpilot import asyncapi

    if args.serve:
        from faststream.specification.asyncapi.site import serve_app

        print(f"AsyncAPI document on http://127.0.0.1:{args.serve} (Ctrl-C stops)")
        serve_app(asyncapi.specification(), "127.0.0.1", args.serve)
    elif args.out:
        Path(args.out).write_text(asyncapi.render())
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(asyncapi.render())


def add_parsers(sub: argparse._SubParsersAction) -> None:
    mcp = sub.add_parser("mcp", help="the MCP server on stdin/stdout, a client of the gateway "
                                     "(ERPILOT_URL, ERPILOT_TOKEN)")
    mcp.add_argument("--stdio", action="store_true", required=True, help="speak MCP on stdin/stdout")
    mcp.add_argument("--url", help="the gateway's URL (default: $ERPILOT_URL)")
    mcp.add_argument("--token-file", metavar="PATH",
                     help="a file holding the bearer token with the requester role (default: $ERPILOT_TOKEN)")
    mcp.add_argument("--token", help=argparse.SUPPRESS)  # refused with a message (``bearer_token``)
    mcp.set_defaults(func=cmd_mcp)
    docs = sub.add_parser("docs", help="the AsyncAPI document of every NATS endpoint (docs/asyncapi/erpilot.json)")
    docs.add_argument("--out", help="write to this file (default: standard output)")
    docs.add_argument("--serve", type=int, metavar="PORT", help="serve it as a web page on this port")
    docs.set_defaults(func=cmd_docs)
