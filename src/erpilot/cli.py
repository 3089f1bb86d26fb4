"""The `erpilot` command (SPEC §7): up, serve, migrate, seed, token."""

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


def cmd_seed(_: argparse.Namespace) -> None:
    inserted = stack.seed(_require("ERPILOT_DATABASE_URL"))
    print("seeded: " + ", ".join(f"{table} +{count}" for table, count in inserted.items()))


def cmd_token(args: argparse.Namespace) -> None:
    secret = os.environ.get("ERPILOT_AUTH_SECRET")
    if not secret:
        path = _data_dir() / "auth_secret"
        if not path.exists():
            sys.exit("erpilot token: set ERPILOT_AUTH_SECRET (or run `erpilot up` once to create a dev secret)")
        secret = path.read_text().strip()
    try:
        print(tokens.make_token(secret, args.sub, args.role or ["requester"], timedelta(hours=args.hours)))
    except ValueError as exc:
        sys.exit(f"erpilot token: {exc}")


def cmd_up(args: argparse.Namespace) -> None:
    from erpilot.up import run_up

    sys.exit(run_up(_data_dir(), http_port=args.port, secure=False))


def cmd_bench(args: argparse.Namespace) -> None:
    from erpilot.bench import print_report, run_bench

    results = run_bench(args.concurrency or [1, 32], args.cycles, Path(args.data_dir) if args.data_dir else None)
    print_report(results)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="erpilot", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="run the whole stack on this machine (embedded NATS and PostgreSQL by default)")
    up.add_argument("--port", type=int, default=int(os.environ.get("ERPILOT_HTTP_PORT", "8000")))
    up.set_defaults(func=cmd_up)
    serve = sub.add_parser("serve", help="run one service (any number of replicas may run)")
    serve.add_argument("service", choices=sorted(SERVE_TARGETS))
    serve.set_defaults(func=cmd_serve)
    sub.add_parser("migrate", help="migrate every service's schema").set_defaults(func=cmd_migrate)
    sub.add_parser("seed", help="load the demo catalog (idempotent)").set_defaults(func=cmd_seed)
    token = sub.add_parser("token", help="print a JWT")
    token.add_argument("--sub", required=True)
    token.add_argument("--role", action="append", choices=tokens.ALL_ROLES)
    token.add_argument("--hours", type=float, default=12.0)
    token.set_defaults(func=cmd_token)
    bench = sub.add_parser("bench", help="approval cycles per second end to end, with stage percentiles")
    bench.add_argument("--concurrency", type=int, action="append", help="repeatable; default 1 and 32")
    bench.add_argument("--cycles", type=int, default=64, help="cycles per concurrency level")
    bench.add_argument("--data-dir", help="where the benchmark's own NATS and PostgreSQL live (default: a temp dir)")
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.func(args)
