"""`erpilot up`, `serve`, `migrate`, `seed` and `nats-config`: running a deployment (``erpilot.stack``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from erpilot.stack import running, stack

SERVE_TARGETS = {
    "erp": "erpilot_erp.app",
    "approval": "erpilot_approval.app",
    "agent": "erpilot_agent.app",
    "gateway": "erpilot_gateway.app",
}


def cmd_up(args: argparse.Namespace) -> None:
    from erpilot.stack.up import run_up

    sys.exit(run_up(running.data_dir(), http_port=args.port, secure=args.secure, cluster=args.cluster,
                    replicas=args.replicas))


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

    database_url = running.require_url("ERPILOT_DATABASE_URL")
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
    inserted = stack.seed(running.require_url("ERPILOT_DATABASE_URL"))
    print("seeded: " + ", ".join(f"{table} +{count}" for table, count in inserted.items()))


def cmd_nats_config(args: argparse.Namespace) -> None:
    """Print or write the least-privilege NATS users (passwords as $ERPILOT_NATS_<USER>_PASSWORD)."""
    from erpilot.stack.nats_config import render

    text = render()
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)


def add_parsers(sub: argparse._SubParsersAction) -> None:
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
