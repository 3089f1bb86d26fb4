"""`erpilot dlq` and `erpilot audit`: the commands that look after a running deployment's dead letters and
the approval service's audit log (``erpilot.ops``)."""

from __future__ import annotations

import argparse
import sys

from erpilot.stack.running import data_dir as _data_dir
from erpilot.stack.running import require_url as _require


def cmd_dlq(args: argparse.Namespace) -> None:
    """List, show or replay dead letters (ERPILOT_NATS_URL, ERPILOT_NATS_USER / ERPILOT_NATS_PASSWORD)."""
    import asyncio

    from erpilot.ops import dlq, dlq_connections

    try:
        print("\n".join(asyncio.run(dlq_connections.run(args, _require("ERPILOT_NATS_URL"), _data_dir()))))
    except dlq.DeadLetterError as exc:
        sys.exit(f"erpilot dlq: {exc}")


def cmd_audit(args: argparse.Namespace) -> None:
    """Verify the approval service's audit chain (exit 1 at a broken link) or export it as JSON lines, as the
    approval service answers ``query.approval.audit_chain`` (ERPILOT_NATS_URL, ERPILOT_NATS_USER / _PASSWORD)."""
    import asyncio
    from datetime import datetime

    from erpilot.ops import audit
    from erpilot_platform.broker import ReplyError, ServiceUnavailable

    url = _require("ERPILOT_NATS_URL")
    login = audit.nats_login(_data_dir())
    try:
        if args.action == "verify":
            intact, text = asyncio.run(audit.verify(url, audit.verify_key(_data_dir()),
                                                    from_checkpoint=args.from_checkpoint, login=login))
            print(text)
            if not intact:
                sys.exit(1)
            return
        since = None
        if args.since:
            try:
                since = datetime.fromisoformat(args.since)
            except ValueError:
                sys.exit(f"erpilot audit export: --since {args.since!r} is not an ISO 8601 time")
            if since.tzinfo is None:
                sys.exit("erpilot audit export: --since needs a time zone, e.g. 2026-12-01T08:00:00Z")
        if args.out:
            with open(args.out, "w", encoding="utf-8") as out:
                count = asyncio.run(audit.export(url, out, since=since, login=login))
            print(f"wrote {count} audit rows to {args.out}", file=sys.stderr)
        else:
            asyncio.run(audit.export(url, sys.stdout, since=since, login=login))
    except (ServiceUnavailable, ReplyError, TimeoutError) as exc:
        sys.exit(f"erpilot audit: the approval service did not answer: {exc}")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    dead = sub.add_parser("dlq", help="dead letters: list, show, replay (once per original message)")
    dead_sub = dead.add_subparsers(dest="action", required=True)
    dead_list = dead_sub.add_parser("list", help="the newest dead letters, with whether each was replayed")
    dead_list.add_argument("--service", help="only the dead letters of this service (agent, approval, erp)")
    dead_list.add_argument("--limit", type=int, default=50)
    dead_list.add_argument("--json", action="store_true")
    dead_sub.add_parser("show", help="one dead letter: headers, reason, body, replay record").add_argument(
        "seq", type=int)
    dead_sub.add_parser("replay", help="publish dead letters to their subjects again (idempotent)").add_argument(
        "seq", type=int, nargs="+")
    dead.set_defaults(func=cmd_dlq)
    audit = sub.add_parser("audit", help="the approval service's tamper-evident audit log: verify, export")
    audit_sub = audit.add_subparsers(dest="action", required=True)
    audit_sub.add_parser("verify", help="walk the hash chain; exit 1 naming the first broken row").add_argument(
        "--from-checkpoint", action="store_true", help="start at the latest signed checkpoint, not the first row")
    audit_export = audit_sub.add_parser("export", help="write the rows as JSON lines (stdout or --out)")
    audit_export.add_argument("--since", help="only rows at or after this ISO 8601 time (with a zone)")
    audit_export.add_argument("--out", help="a file to write instead of stdout")
    audit.set_defaults(func=cmd_audit)
