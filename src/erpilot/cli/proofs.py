"""`erpilot bench`, `erpilot context-eval` and `erpilot torture`: what measures and proves the system, each in a
package of its own (``erpilot.bench``, ``erpilot.context_eval``, ``erpilot.torture``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


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


def cmd_torture(args: argparse.Namespace) -> None:
    from erpilot.torture.campaign import run_campaign, summary
    from erpilot.torture.targets import TableError

    try:
        campaign, interrupted = run_campaign(args.failpoint, args.runs, args.seed,
                                             data_dir=Path(args.data_dir) if args.data_dir else None,
                                             ack_wait=args.ack_wait)
    except TableError as exc:
        print(f"erpilot torture: {exc}", file=sys.stderr)
        sys.exit(2)
    if interrupted:
        print("interrupted: the table shows the runs that completed", file=sys.stderr)
    print(summary(campaign, args.runs))
    if interrupted:
        sys.exit(130)
    sys.exit(1 if campaign.first_failure else 0)


def _runs(text: str) -> int:
    try:
        runs = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if runs < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {runs}: a campaign without runs crashes "
                                         "nothing and proves nothing")
    return runs


def add_parsers(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="approval cycles end to end per concurrency level, and what they cost")
    bench.add_argument("--concurrency", type=int, action="append", help="repeatable; default 1 and 32")
    bench.add_argument("--cycles", type=int, default=64, help="measured cycles per concurrency level")
    bench.add_argument("--reads", type=int, default=64, help="measured read tool calls per concurrency level")
    bench.add_argument("--peer", action="store_true",
                       help="then the LangGraph and DBOS peers (own venv), the ratios and issue 31's targets")
    bench.add_argument("--peer-cycles", type=int, default=300, help="each peer's cycles per level")
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
    torture = sub.add_parser("torture", help="seeded crash campaign at every failpoint, checked after each run",
                             epilog="Exit status: 0 when every run crashed at its failpoint and passed every check; "
                                    "1 when a run failed (a broken invariant, or a failpoint it never reached); "
                                    "2 for a bad command line (--runs below 1, an unknown failpoint); "
                                    "130 when interrupted.")
    torture.add_argument("--runs", type=_runs, default=10, help="runs per failpoint, at least 1 (default 10)")
    torture.add_argument("--seed", type=int, default=1, help="seed of the first run; run k uses seed+k")
    torture.add_argument("--failpoint", action="append",
                         help="only this failpoint (every service it is armed in) or NAME@SERVICE (repeatable)")
    torture.add_argument("--ack-wait", type=float, default=2.0,
                         help="JetStream ack wait of the campaign's services, in seconds (default 2)")
    torture.add_argument("--data-dir", help="where the campaign's NATS, PostgreSQL and logs live (default: a temp dir)")
    torture.set_defaults(func=cmd_torture)
