"""`erpilot keygen` and `erpilot token`: key pairs and bearer tokens (``erpilot.stack.tokens``)."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta

from erpilot.stack import running, tokens


def cmd_keygen(_: argparse.Namespace) -> None:
    """Print a new grant key pair as shell exports (the approval signs, the ERP verifies)."""
    from erpilot_platform.grants import new_keypair_env

    for name, value in new_keypair_env().items():
        print(f"export {name}={value}")


def cmd_token(args: argparse.Namespace) -> None:
    secret = os.environ.get("ERPILOT_AUTH_SECRET") or _dev_secret()
    try:
        print(tokens.make_token(secret, args.sub, args.role or ["requester"], timedelta(hours=args.hours)))
    except ValueError as exc:
        sys.exit(f"erpilot token: {exc}")


def _dev_secret() -> str:
    path = running.data_dir() / "auth_secret"
    if not path.exists():
        sys.exit("erpilot: set ERPILOT_AUTH_SECRET (or run `erpilot up` once to create a dev secret)")
    return path.read_text().strip()


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("keygen", help="print a new Ed25519 grant key pair as shell exports").set_defaults(
        func=cmd_keygen)
    token = sub.add_parser("token", help="print a JWT")
    token.add_argument("--sub", required=True)
    token.add_argument("--role", action="append", choices=tokens.ALL_ROLES)
    token.add_argument("--hours", type=float, default=12.0)
    token.set_defaults(func=cmd_token)
