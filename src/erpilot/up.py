"""`erpilot up`: the whole stack on one machine, stopped cleanly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from erpilot import stack, tokens
from erpilot.embedded import EmbeddedNats, EmbeddedPostgres


def run_up(data_dir: Path, *, http_port: int, secure: bool) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    nats_url = os.environ.get("ERPILOT_NATS_URL")
    database_url = os.environ.get("ERPILOT_DATABASE_URL")
    nats = postgres = None
    running: stack.Stack | None = None
    try:
        if not nats_url:
            print("starting embedded NATS (JetStream) ...", flush=True)
            nats = EmbeddedNats(data_dir, port=int(os.environ.get("ERPILOT_NATS_PORT", "0")) or None)
            nats_url = nats.start()
        if not database_url:
            print("starting embedded PostgreSQL ...", flush=True)
            postgres = EmbeddedPostgres(data_dir)
            database_url = postgres.start()
        print("migrating ...", flush=True)
        stack.migrate_all(database_url)
        inserted = stack.seed(database_url)
        if any(inserted.values()):
            print("loaded the demo catalog", flush=True)
        secret = os.environ.get("ERPILOT_AUTH_SECRET") or tokens.dev_auth_secret(data_dir)
        running = stack.Stack(nats_url, database_url, data_dir, http_port=http_port, env={
            "ERPILOT_DEV_MODE": "1", "ERPILOT_AUTH_SECRET": secret})
        running.start()
        running.supervisor.handle_signals()
        running.wait_ready()
        token = tokens.make_token(secret, "dev", list(tokens.ALL_ROLES))
        print(f"""
Erpilot is running.
  console:   {running.base_url}/?token={token}
  API:       {running.base_url}  (OpenAPI at {running.base_url}/openapi.json)
  NATS:      {nats_url}
  database:  {database_url}
  dev token (every role): {token}
  logs:      {data_dir / 'logs'}
Press Ctrl-C to stop.""", flush=True)
        return running.supervisor.wait()
    except SystemExit as exc:  # SIGINT/SIGTERM during start-up
        return int(exc.code or 0)
    except Exception as exc:
        print(f"erpilot up: {exc}", file=sys.stderr)
        return 1
    finally:
        print("stopping ...", flush=True)
        if running is not None:
            running.stop()
        if postgres is not None:
            postgres.stop()
        if nats is not None:
            nats.stop()
        print("stopped.", flush=True)
