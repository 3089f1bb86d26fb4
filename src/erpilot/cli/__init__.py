"""The `erpilot` command (SPEC §7). Each group of subcommands is a module of its own that adds its parsers; a
command parses its arguments, calls the package that does the work, prints and exits:

- ``deploy``: up, serve, migrate, seed, nats-config (``erpilot.stack``);
- ``credentials``: keygen, token;
- ``ops``: dlq, audit (``erpilot.ops``);
- ``clients``: mcp, docs (``erpilot.mcp_stdio``, ``erpilot.asyncapi``);
- ``proofs``: bench, context-eval, torture (``erpilot.bench``, ``erpilot.context_eval``, ``erpilot.torture``).
"""

from __future__ import annotations

import argparse

from erpilot.cli import clients, credentials, deploy, ops, proofs

GROUPS = (deploy, credentials, ops, clients, proofs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="erpilot", description="Erpilot: the stack, its operations and its proofs.")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.func(args)
