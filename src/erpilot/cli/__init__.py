"""The `erpilot` command (SPEC §7): up, serve, migrate, seed, token, nats-config, dlq, audit, mcp."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from pathlib import Path

from erpilot.stack import running, stack, tokens

SERVE_TARGETS = {
    "erp": "erpilot_erp.app",
    "approval": "erpilot_approval.app",
    "agent": "erpilot_agent.app",
    "gateway": "erpilot_gateway.app",
}


_data_dir = running.data_dir
_require = running.require_url


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


def cmd_migrate(args: argparse.Namespace) -> None:
    """As the database owner: every schema, then one role per service with rights on its own schema."""
    from erpilot.stack import db_roles

    database_url = _require("ERPILOT_DATABASE_URL")
    stack.migrate_all(database_url)
    print("migrated: erp, approval, agent")
    if not args.skip_roles:
        passwords = db_roles.passwords_from_env()
        db_roles.provision(database_url, passwords)
        unset = [db_roles.password_variable(s) for s, password in passwords.items() if not password]
        print("roles: " + ", ".join(db_roles.ROLES.values())
              + (f" (no password set for {', '.join(unset)})" if unset else ""))
    nats_url = os.environ.get("ERPILOT_NATS_URL")
    if nats_url:  # streams and consumers belong to operations: declared here with the admin NATS user
        import asyncio

        from erpilot.stack.nats_credentials import migrate_jetstream
        from erpilot_platform.jetstream import JETSTREAM_VERSION, replicas_from_env

        try:
            replicas = replicas_from_env()
        except ValueError as exc:
            sys.exit(f"erpilot migrate: {exc}")
        how, done = asyncio.run(migrate_jetstream(nats_url, user=os.environ.get("ERPILOT_NATS_USER"),
                                                  password=os.environ.get("ERPILOT_NATS_PASSWORD"),
                                                  replicas=replicas))
        for line in done:
            print(f"  {line}")
        print(f"JetStream migrated to version {JETSTREAM_VERSION}: {replicas} replica(s) ({how})")


def cmd_seed(_: argparse.Namespace) -> None:
    inserted = stack.seed(_require("ERPILOT_DATABASE_URL"))
    print("seeded: " + ", ".join(f"{table} +{count}" for table, count in inserted.items()))


def cmd_token(args: argparse.Namespace) -> None:
    secret = os.environ.get("ERPILOT_AUTH_SECRET") or _dev_secret()
    try:
        print(tokens.make_token(secret, args.sub, args.role or ["requester"], timedelta(hours=args.hours)))
    except ValueError as exc:
        sys.exit(f"erpilot token: {exc}")


def cmd_keygen(_: argparse.Namespace) -> None:
    """Print a new grant key pair as shell exports (the approval signs, the ERP verifies)."""
    from erpilot_platform.grants import new_keypair_env

    for name, value in new_keypair_env().items():
        print(f"export {name}={value}")


def cmd_mcp(args: argparse.Namespace) -> None:
    """Serve MCP on stdin/stdout for one token, as a client of the gateway at ERPILOT_URL (nothing else needed)."""
    import asyncio
    import logging

    from erpilot.mcp_stdio import GatewayRefused, serve_stdio
    from erpilot_platform.logs import configure_logging

    if not args.stdio:
        sys.exit("erpilot mcp: only --stdio is served here; Streamable HTTP is at /mcp of the gateway")
    url = args.url or os.environ.get("ERPILOT_URL")
    token = args.token or os.environ.get("ERPILOT_TOKEN")
    if not url:
        sys.exit("erpilot mcp: set ERPILOT_URL (or pass --url) to the gateway's URL, e.g. http://127.0.0.1:8000")
    if not token:
        sys.exit("erpilot mcp: set ERPILOT_TOKEN (or pass --token) to a bearer token with the requester role "
                 "(`erpilot token --sub you --role requester`)")
    configure_logging("mcp-stdio", os.environ.get("ERPILOT_LOG_LEVEL", "INFO"))  # stderr: stdout carries MCP
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request would drown the rest
    try:
        asyncio.run(serve_stdio(url, token))
    except GatewayRefused as exc:
        sys.exit(f"erpilot mcp: {exc}")


def _dev_secret() -> str:
    path = _data_dir() / "auth_secret"
    if not path.exists():
        sys.exit("erpilot: set ERPILOT_AUTH_SECRET (or run `erpilot up` once to create a dev secret)")
    return path.read_text().strip()


def cmd_up(args: argparse.Namespace) -> None:
    from erpilot.stack.up import run_up

    sys.exit(run_up(_data_dir(), http_port=args.port, secure=args.secure, cluster=args.cluster,
                    replicas=args.replicas))


def cmd_nats_config(args: argparse.Namespace) -> None:
    """Print or write the least-privilege NATS users (passwords as $ERPILOT_NATS_<USER>_PASSWORD)."""
    from erpilot.stack.nats_security import render

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
    import json

    from erpilot.bench.report import render
    from erpilot.bench.run import run_bench

    env = {"ERPILOT_LOG_LEVEL": args.log_level} if args.log_level else {}
    result = run_bench(args.concurrency or [1, 32], args.cycles, Path(args.data_dir) if args.data_dir else None,
                       cluster=args.cluster or 0, replicas=args.replicas, reads=args.reads, peer=args.peer,
                       peer_cycles=args.peer_cycles, env=env)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    print(render(result))


def cmd_context_eval(args: argparse.Namespace) -> None:
    from erpilot.context_eval.run import main as context_eval

    sys.exit(context_eval(as_json=args.json, verbose=args.verbose))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="erpilot", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser(
        "up", help="run the whole stack on this machine (embedded NATS and PostgreSQL by default)",
        description="Run the whole stack on this machine. A process that dies (a service, the embedded NATS "
                    "server or PostgreSQL) is restarted with a backoff ('restarted <name>').",
        epilog="Exit status: 0 when stopped by Ctrl-C (SIGINT) or SIGTERM, whenever it arrives: that is the "
               "normal way to stop it, not a failure, so it does not follow the shell's 128+N convention "
               "(130, 143); 1 when start-up fails, or when one process exited 5 times within 60 s (then "
               "everything is stopped).")
    up.add_argument("--port", type=int, default=int(os.environ.get("ERPILOT_HTTP_PORT", "8000")))
    up.add_argument("--secure", action="store_true",
                    help="one least-privilege NATS user per service (as deployed), not an open NATS")
    up.add_argument("--cluster", type=int, choices=(3,),
                    help="a local three-node NATS cluster, streams with 3 replicas")
    up.add_argument("--replicas", type=int, default=1, help="processes of every service (default 1)")
    up.set_defaults(func=cmd_up)
    serve = sub.add_parser("serve", help="run one service (any number of replicas may run)")
    serve.add_argument("service", choices=sorted(SERVE_TARGETS))
    serve.set_defaults(func=cmd_serve)
    migrate = sub.add_parser("migrate", help="migrate every service's schema and create the service roles")
    migrate.add_argument("--skip-roles", action="store_true",
                         help="only migrate (the erpilot_* roles are managed elsewhere)")
    migrate.set_defaults(func=cmd_migrate)
    sub.add_parser("seed", help="load the demo catalog (idempotent)").set_defaults(func=cmd_seed)
    nats_config = sub.add_parser("nats-config", help="the NATS users and permissions of a deployment")
    nats_config.add_argument("--out", help="write to this file (default: standard output)")
    nats_config.set_defaults(func=cmd_nats_config)
    sub.add_parser("keygen", help="print a new Ed25519 grant key pair as shell exports").set_defaults(
        func=cmd_keygen)
    token = sub.add_parser("token", help="print a JWT")
    token.add_argument("--sub", required=True)
    token.add_argument("--role", action="append", choices=tokens.ALL_ROLES)
    token.add_argument("--hours", type=float, default=12.0)
    token.set_defaults(func=cmd_token)
    mcp = sub.add_parser("mcp", help="the MCP server on stdin/stdout, a client of the gateway "
                                     "(ERPILOT_URL, ERPILOT_TOKEN)")
    mcp.add_argument("--stdio", action="store_true", required=True, help="speak MCP on stdin/stdout")
    mcp.add_argument("--url", help="the gateway's URL (default: $ERPILOT_URL)")
    mcp.add_argument("--token", help="bearer token with the requester role (default: $ERPILOT_TOKEN)")
    mcp.set_defaults(func=cmd_mcp)
    docs = sub.add_parser("docs", help="the AsyncAPI document of every NATS endpoint (docs/asyncapi/erpilot.json)")
    docs.add_argument("--out", help="write to this file (default: standard output)")
    docs.add_argument("--serve", type=int, metavar="PORT", help="serve it as a web page on this port")
    docs.set_defaults(func=cmd_docs)
    from erpilot.cli.ops import add_parsers as add_ops_parsers

    add_ops_parsers(sub)  # dlq, audit
    bench = sub.add_parser("bench", help="approval cycles end to end per concurrency level, and what they cost")
    bench.add_argument("--concurrency", type=int, action="append", help="repeatable; default 1 and 32")
    bench.add_argument("--cycles", type=int, default=64, help="measured cycles per concurrency level")
    bench.add_argument("--reads", type=int, default=64, help="measured read tool calls per concurrency level")
    bench.add_argument("--peer", action="store_true",
                       help="then the LangGraph peer (benchmarks/peer_langgraph.py, own venv) and the ratios")
    bench.add_argument("--peer-cycles", type=int, default=300, help="the peer's cycles per level")
    bench.add_argument("--log-level", help="the services' ERPILOT_LOG_LEVEL (default: theirs, as erpilot up)")
    bench.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    bench.add_argument("--data-dir", help="where the benchmark's own NATS and PostgreSQL live (default: a temp dir)")
    bench.add_argument("--cluster", type=int, choices=(3,), help="on a local three-node NATS cluster (R3 streams)")
    bench.add_argument("--replicas", type=int, default=1, help="processes of every service (default 1)")
    bench.set_defaults(func=cmd_bench)
    context_eval = sub.add_parser("context-eval", help="the context view on frozen long sessions (offline)")
    context_eval.add_argument("--json", action="store_true", help="machine-readable outcomes")
    context_eval.add_argument("--verbose", action="store_true", help="list every fact of every scenario")
    context_eval.set_defaults(func=cmd_context_eval)
    from erpilot.torture.campaign import add_parser as add_torture_parser

    add_torture_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.func(args)
