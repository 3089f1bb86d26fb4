"""The `erpilot` command (SPEC §7): up, serve, migrate, seed, token, nats-config, mcp."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from pathlib import Path

from erpilot import stack, tokens

SERVE_TARGETS = {
    "erp": "erpilot_erp.app",
    "approval": "erpilot_approval.app",
    "agent": "erpilot_agent.app",
    "gateway": "erpilot_gateway.app",
}


def _data_dir() -> Path:
    return Path(os.environ.get("ERPILOT_DATA_DIR", ".erpilot")).resolve()


def _require(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        sys.exit(f"erpilot: {name} is not set")
    return value


def cmd_serve(args: argparse.Namespace) -> None:
    """Run one service in this process against ERPILOT_NATS_URL / ERPILOT_DATABASE_URL."""
    import importlib

    from erpilot_platform.settings import ConfigurationError
    from erpilot_platform.telemetry import configure_telemetry

    configure_telemetry(args.service)
    try:
        importlib.import_module(SERVE_TARGETS[args.service]).main()
    except ConfigurationError as exc:
        sys.exit(f"erpilot serve {args.service}: configuration error: {exc}")


def cmd_migrate(_: argparse.Namespace) -> None:
    stack.migrate_all(_require("ERPILOT_DATABASE_URL"))
    print("migrated: erp, approval, agent")
    nats_url = os.environ.get("ERPILOT_NATS_URL")
    if nats_url:  # streams belong to operations: declared here with the admin NATS user (if any)
        import asyncio

        from erpilot.nats_credentials import declare_streams

        how = asyncio.run(declare_streams(nats_url, user=os.environ.get("ERPILOT_NATS_USER"),
                                          password=os.environ.get("ERPILOT_NATS_PASSWORD")))
        print(f"declared JetStream streams ({how})")


def cmd_seed(_: argparse.Namespace) -> None:
    inserted = stack.seed(_require("ERPILOT_DATABASE_URL"))
    print("seeded: " + ", ".join(f"{table} +{count}" for table, count in inserted.items()))


def cmd_token(args: argparse.Namespace) -> None:
    secret = os.environ.get("ERPILOT_AUTH_SECRET") or _dev_secret()
    try:
        print(tokens.make_token(secret, args.sub, args.role or ["requester"], timedelta(hours=args.hours)))
    except ValueError as exc:
        sys.exit(f"erpilot token: {exc}")


def cmd_mcp(args: argparse.Namespace) -> None:
    """Serve MCP on stdin/stdout for the token in ERPILOT_TOKEN (or --token), against ERPILOT_NATS_URL."""
    import asyncio

    from erpilot_gateway.mcp_server.stdio import TokenRefused, serve_stdio, stdio_user
    from erpilot_gateway.settings import GatewaySettings
    from erpilot_platform.logs import configure_logging
    from erpilot_platform.settings import ConfigurationError

    if not args.stdio:
        sys.exit("erpilot mcp: only --stdio is served here; Streamable HTTP is at /mcp of the gateway")
    settings = GatewaySettings()
    configure_logging("gateway", settings.log_level)  # stderr: stdout carries the protocol
    try:
        secret = settings.auth_secret or _dev_secret()
        user = stdio_user(args.token or os.environ.get("ERPILOT_TOKEN"), secret)
    except (TokenRefused, ConfigurationError) as exc:
        sys.exit(f"erpilot mcp: {exc}")
    asyncio.run(serve_stdio(settings, user))


def _dev_secret() -> str:
    path = _data_dir() / "auth_secret"
    if not path.exists():
        sys.exit("erpilot: set ERPILOT_AUTH_SECRET (or run `erpilot up` once to create a dev secret)")
    return path.read_text().strip()


def cmd_up(args: argparse.Namespace) -> None:
    from erpilot.up import run_up

    sys.exit(run_up(_data_dir(), http_port=args.port, secure=args.secure))


def cmd_nats_config(args: argparse.Namespace) -> None:
    """Print or write the least-privilege NATS users (passwords as $ERPILOT_NATS_<USER>_PASSWORD)."""
    from erpilot.nats_security import render

    text = render()
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)


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


def cmd_bench(args: argparse.Namespace) -> None:
    from erpilot.bench import print_report, run_bench

    results = run_bench(args.concurrency or [1, 32], args.cycles, Path(args.data_dir) if args.data_dir else None)
    print_report(results)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="erpilot", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="run the whole stack on this machine (embedded NATS and PostgreSQL by default)")
    up.add_argument("--port", type=int, default=int(os.environ.get("ERPILOT_HTTP_PORT", "8000")))
    up.add_argument("--secure", action="store_true",
                    help="one least-privilege NATS user per service (as deployed), not an open NATS")
    up.set_defaults(func=cmd_up)
    serve = sub.add_parser("serve", help="run one service (any number of replicas may run)")
    serve.add_argument("service", choices=sorted(SERVE_TARGETS))
    serve.set_defaults(func=cmd_serve)
    sub.add_parser("migrate", help="migrate every service's schema").set_defaults(func=cmd_migrate)
    sub.add_parser("seed", help="load the demo catalog (idempotent)").set_defaults(func=cmd_seed)
    nats_config = sub.add_parser("nats-config", help="the NATS users and permissions of a deployment")
    nats_config.add_argument("--out", help="write to this file (default: standard output)")
    nats_config.set_defaults(func=cmd_nats_config)
    token = sub.add_parser("token", help="print a JWT")
    token.add_argument("--sub", required=True)
    token.add_argument("--role", action="append", choices=tokens.ALL_ROLES)
    token.add_argument("--hours", type=float, default=12.0)
    token.set_defaults(func=cmd_token)
    mcp = sub.add_parser("mcp", help="the MCP server on stdin/stdout (ERPILOT_TOKEN, ERPILOT_NATS_URL)")
    mcp.add_argument("--stdio", action="store_true", required=True, help="speak MCP on stdin/stdout")
    mcp.add_argument("--token", help="bearer token (default: $ERPILOT_TOKEN)")
    mcp.set_defaults(func=cmd_mcp)
    docs = sub.add_parser("docs", help="the AsyncAPI document of every NATS endpoint (docs/asyncapi/erpilot.json)")
    docs.add_argument("--out", help="write to this file (default: standard output)")
    docs.add_argument("--serve", type=int, metavar="PORT", help="serve it as a web page on this port")
    docs.set_defaults(func=cmd_docs)
    bench = sub.add_parser("bench", help="approval cycles per second end to end, with stage percentiles")
    bench.add_argument("--concurrency", type=int, action="append", help="repeatable; default 1 and 32")
    bench.add_argument("--cycles", type=int, default=64, help="cycles per concurrency level")
    bench.add_argument("--data-dir", help="where the benchmark's own NATS and PostgreSQL live (default: a temp dir)")
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.func(args)
