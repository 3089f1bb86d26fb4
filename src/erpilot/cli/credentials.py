"""`erpilot keygen` and `erpilot token`: key pairs and bearer tokens (``erpilot.stack.tokens``)."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta

from erpilot.stack import running, tokens

KEY_HOLDERS = {"approval": "the approval service", "erp": "the ERP", "gateway": "the gateway"}


def cmd_keygen(_: argparse.Namespace) -> None:
    """Print three new key pairs as shell exports: grants (the approval service signs, the ERP verifies), requester
    assertions (the gateway signs, the ERP and the approval service verify) and the ledger's approval requests (the
    ERP signs, the approval service verifies)."""
    from erpilot_platform import dev_keys
    from erpilot_platform.grants import new_keypair_env

    for pair in dev_keys.PAIRS.values():
        verifiers = " and ".join(KEY_HOLDERS[service] for service in pair.verifiers)
        print(f"# {pair.signs}: {pair.signing_env} to {KEY_HOLDERS[pair.signer]} alone, "
              f"{pair.verify_env} to {verifiers}")
        for name, value in new_keypair_env(pair.env_prefix).items():
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
    sub.add_parser("keygen", help="print new Ed25519 key pairs (grants, requester assertions, "
                   "the ledger's approval requests) as shell exports").set_defaults(func=cmd_keygen)
    token = sub.add_parser("token", help="print a JWT")
    token.add_argument("--sub", required=True)
    token.add_argument("--role", action="append", choices=tokens.ALL_ROLES)
    token.add_argument("--hours", type=float, default=12.0)
    token.set_defaults(func=cmd_token)
