"""`erpilot up`: the whole stack on one machine, healed when a process dies, stopped cleanly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from erpilot.stack import db_roles, nats_config, nats_credentials, nats_security, stack, tokens
from erpilot.stack import running as stack_file
from erpilot.stack.embedded import EmbeddedNats, EmbeddedNatsCluster, EmbeddedPostgres
from erpilot.stack.supervisor import StopRequested, Supervisor
from erpilot_platform import jetstream


def run_up(data_dir: Path, *, http_port: int, secure: bool, cluster: int = 0, replicas: int = 1) -> int:
    """Start everything, keep it running (restarting what dies), stop it all on SIGINT/SIGTERM.

    Exit status: 0 after a stop by SIGINT or SIGTERM, wherever it lands (start-up included; everything that
    started is stopped first); 1 when start-up fails, or when one process exited `restarts.RestartPolicy.max_exits`
    times within its window.
    """
    supervisor = Supervisor(data_dir / "logs")
    supervisor.handle_signals()  # first: a signal at any later point stops what started, in order
    started = _Started()
    failed = False
    try:
        try:
            return_code = _start_and_serve(supervisor, started, data_dir, http_port=http_port, secure=secure,
                                           cluster=cluster, replicas=replicas)
            failed = return_code != 0
        except Exception as exc:
            print(f"erpilot up: {exc}", file=sys.stderr, flush=True)
            failed = True
        supervisor.begin_stop()
    except StopRequested:  # raised once at most, in start-up: the supervisor is stopping from then on
        pass
    print("stopping ...", flush=True)
    stack_file.forget(data_dir)
    started.stop(supervisor)
    supervisor.restore_signals()
    print("stopped.", flush=True)
    return 1 if failed else 0


class _Started:
    """What `erpilot up` started, to be stopped in reverse order (services, then PostgreSQL, then NATS)."""

    def __init__(self) -> None:
        self.nats: EmbeddedNats | EmbeddedNatsCluster | None = None
        self.postgres: EmbeddedPostgres | None = None

    def stop(self, supervisor: Supervisor) -> None:
        supervisor.stop_all()
        if self.postgres is not None:
            self.postgres.stop()
        if self.nats is not None:
            self.nats.stop()


def _start_and_serve(supervisor: Supervisor, started: _Started, data_dir: Path, *, http_port: int, secure: bool,
                     cluster: int, replicas: int) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    nats_url = os.environ.get("ERPILOT_NATS_URL")
    database_url = os.environ.get("ERPILOT_DATABASE_URL")
    service_envs: dict[str, dict[str, str]] = {}
    nats_note = ""
    passwords = None
    if secure:  # one least-privilege NATS user per service (src/erpilot/stack/nats_security.py)
        if nats_url:  # a server configured with `erpilot nats-config`: passwords from the environment
            passwords = nats_credentials.passwords_from_env()
            nats_note = "  (one least-privilege user per service)"
        else:
            passwords = nats_credentials.load_or_create_passwords(data_dir)
            nats_note = ("  (one least-privilege user per service; passwords in "
                         f"{data_dir / nats_credentials.PASSWORDS_FILE})")
        service_envs = nats_credentials.service_credentials(passwords)
    nats_replicas = jetstream.replicas_from_env()
    if not nats_url and cluster:  # --cluster N: N nats-server processes, streams with N replicas
        print(f"starting an embedded {cluster}-node NATS cluster (JetStream) ...", flush=True)
        started.nats = nats = EmbeddedNatsCluster(data_dir / "nats-cluster", cluster,
                                                  **_secure_nats_options(passwords))
        nats_url, nats_replicas = nats.start(), cluster
        for index, node in enumerate(nats.nodes):
            supervisor.watch(f"nats-{index + 1}", node)
    elif not nats_url:
        print("starting embedded NATS (JetStream) ...", flush=True)
        started.nats = nats = EmbeddedNats(data_dir, port=int(os.environ.get("ERPILOT_NATS_PORT", "0")) or None,
                                           **_secure_nats_options(passwords))
        nats_url = nats.start()
        supervisor.watch("nats", nats)
    if not database_url:
        print("starting embedded PostgreSQL ...", flush=True)
        started.postgres = EmbeddedPostgres(data_dir)
        database_url = started.postgres.start()
        supervisor.watch("postgres", started.postgres)
    print("migrating ...", flush=True)
    stack.migrate_all(database_url)
    # As deployed, with or without --secure: each service connects as its own role, with rights on its
    # own schema only (fresh passwords on every start); the owner URL printed below is the operator's.
    db_passwords = db_roles.passwords_or_new()
    db_roles.provision(database_url, db_passwords)
    service_envs = stack.merge_envs(service_envs, db_roles.role_envs(database_url, db_passwords))
    inserted = stack.seed(database_url)
    if any(inserted.values()):
        print("loaded the demo catalog", flush=True)
    secret = os.environ.get("ERPILOT_AUTH_SECRET") or tokens.dev_auth_secret(data_dir)
    running = stack.Stack(nats_url, database_url, data_dir, http_port=http_port, env={
        "ERPILOT_DEV_MODE": "1", "ERPILOT_AUTH_SECRET": secret},  # keys: yours if set, else dev_keys (Stack)
        service_envs=service_envs, replicas=dict.fromkeys(stack.SERVICES, replicas), nats_replicas=nats_replicas,
        nats_admin=(nats_security.ADMIN, passwords[nats_security.ADMIN]) if passwords else None,
        supervisor=supervisor)
    running.start()
    running.wait_ready()
    stack_file.record(data_dir, database_url=database_url, nats_url=nats_url, gateway_urls=running.gateway_urls)
    token = tokens.make_token(secret, "dev", list(tokens.ALL_ROLES))
    policy = supervisor.restart_policy
    print(f"""
Erpilot is running.
  console:   {running.base_url}/?token={token}
  API:       {' '.join(running.gateway_urls)}  (OpenAPI at {running.base_url}/openapi.json)
  NATS:      {nats_url}{nats_note}  (streams with {nats_replicas} replica(s); {replicas} of every service)
  database:  {database_url}
  dev token (every role): {token}
  logs:      {data_dir / 'logs'}
A process that dies is restarted; {policy.max_exits} exits of one within {policy.window:.0f} s stop everything.
Press Ctrl-C to stop.""", flush=True)
    return supervisor.wait()


def _secure_nats_options(passwords: dict[str, str] | None) -> dict:
    if passwords is None:
        return {}
    return {"jetstream_domain": nats_security.JS_DOMAIN, "extra_config": nats_config.render(passwords=passwords)}
