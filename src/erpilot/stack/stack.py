"""The whole Erpilot stack on one machine: infrastructure, migrations, seed, services as processes.

Used by `erpilot up` and by the e2e tests, so both run exactly the same way.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from erpilot.stack.supervisor import Supervisor

SERVICES = ("erp", "approval", "agent", "gateway")
# Secrets only their owner receives; every other service starts without them, even when they are set in
# the environment of the process that starts the stack. The agent runs the model (the least trusted
# service): with the signing key it could approve anything, with the JWT secret act as any person.
PRIVATE_ENV: dict[str, tuple[str, ...]] = {
    "ERPILOT_GRANT_SIGNING_KEY": ("approval",),
    "ERPILOT_AUTH_SECRET": ("gateway",),
    # The gateway vouches for the person behind each command it sends the agent (requester assertions): with
    # this key the agent could name anyone as the requester of a write.
    "ERPILOT_ASSERTION_SIGNING_KEY": ("gateway",),
    "ERPILOT_ASSERTION_PREVIOUS_SIGNING_KEY": ("gateway",),  # a rotated-out key: its sessions' owner MACs
    # The ERP signs the approval requests it builds from its own record: with this key the agent could show an
    # approver a preview of its own.
    "ERPILOT_LEDGER_SIGNING_KEY": ("erp",),
    # The approval service checks the chat card's callbacks (issue 34): with this secret anyone could press its
    # buttons as any mapped chat user.
    "ERPILOT_CHAT_SIGNING_SECRET": ("approval",),
    # Public keys are no secret, but each goes only where it is used, as the development key files do
    # (erpilot_platform.dev_keys): a service's environment is its own keys and nothing more.
    "ERPILOT_GRANT_VERIFY_KEY": ("erp",),
    "ERPILOT_ASSERTION_VERIFY_KEY": ("erp", "approval"),
    "ERPILOT_LEDGER_VERIFY_KEY": ("approval",),
    # Each service gets its own credentials as ERPILOT_NATS_PASSWORD / in its ERPILOT_DATABASE_URL.
    **{f"ERPILOT_NATS_{user.upper()}_PASSWORD": () for user in (*SERVICES, "admin")},
    **{f"ERPILOT_DB_{service.upper()}_PASSWORD": () for service in SERVICES},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def merge_envs(*envs: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Per-service environments merged service by service (NATS users, database roles, ...)."""
    merged: dict[str, dict[str, str]] = {}
    for env in envs:
        for service, values in env.items():
            merged.setdefault(service, {}).update(values)
    return merged


def migrate_all(database_url: str) -> None:
    """Bring every service's schema to head (each has its own Alembic history)."""
    from erpilot_agent.app import MIGRATIONS as AGENT
    from erpilot_approval.app import MIGRATIONS as APPROVAL
    from erpilot_erp.app import MIGRATIONS as ERP
    from erpilot_platform.migrations import upgrade

    for location, schema in ((ERP, "erp"), (APPROVAL, "approval"), (AGENT, "agent")):
        upgrade(location, database_url, schema)


def seed(database_url: str) -> dict[str, int]:
    from erpilot_erp.app import seed_demo_catalog

    return seed_demo_catalog(database_url)


@dataclass
class Stack:
    """Service processes against given NATS and PostgreSQL URLs."""

    nats_url: str
    database_url: str
    data_dir: Path
    http_port: int = 8000
    env: dict[str, str] = field(default_factory=dict)
    # Per-service additions to ``env`` (each service's own NATS user and database role, when used).
    service_envs: dict[str, dict[str, str]] = field(default_factory=dict)
    replicas: dict[str, int] = field(default_factory=dict)
    # JetStream: copies of every stream (3 on a three-node cluster) and the admin user that declares them.
    nats_replicas: int = 1
    nats_admin: tuple[str, str] | None = None
    supervisor: Supervisor | None = None
    # Gateway replica i > 0 listens on a port of its own (replica 0 on http_port).
    gateway_ports: dict[int, int] = field(default_factory=dict)
    nats: object | None = None  # the embedded NATS server or cluster, when the caller started one
    # The pairs (``dev_keys.PAIRS`` names) not given as variables: the data dir's development key files.
    dev_key_pairs: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        # The key pairs (grants, requester assertions, the ledger's approval requests): as given, in ``env`` or this
        # process's environment, else the data dir's development keys, a file per service, created here once and
        # kept across restarts (erpilot_platform.dev_keys). Each service is handed only its own keys (``env_for``),
        # never the directory.
        from erpilot_platform import dev_keys

        given = {**os.environ, **self.env}
        self.dev_key_pairs = tuple(name for name, pair in dev_keys.PAIRS.items() if not given.get(pair.signing_env))
        if self.dev_key_pairs:
            dev_keys.ensure(self.data_dir)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def gateway_urls(self) -> list[str]:
        """Every gateway replica's base URL (a load balancer would sit in front of them)."""
        return [self.base_url] + [f"http://127.0.0.1:{self.gateway_ports[i]}"
                                  for i in range(1, self.replicas.get("gateway", 1))]

    def service_env(self) -> dict[str, str]:
        return {
            "ERPILOT_NATS_URL": self.nats_url,
            "ERPILOT_DATABASE_URL": self.database_url,
            "ERPILOT_DATA_DIR": str(self.data_dir),
            "ERPILOT_HTTP_PORT": str(self.http_port),
            "ERPILOT_PUBLIC_URL": self.env.get("ERPILOT_PUBLIC_URL", self.base_url),
            "ERPILOT_NATS_REPLICAS": str(self.nats_replicas),
            **self.env,
        }

    def migrate_jetstream(self) -> list[str]:
        """Declare the streams and durable consumers (as `erpilot migrate` does): services only verify them."""
        from erpilot.stack.nats_credentials import migrate_jetstream

        user, password = self.nats_admin or (None, None)
        return asyncio.run(migrate_jetstream(self.nats_url, user=user, password=password,
                                             replicas=self.nats_replicas, environ={**os.environ, **self.env}))[1]

    def start(self) -> None:
        self.migrate_jetstream()
        if self.supervisor is None:  # `erpilot up` brings its own, which already watches the servers
            self.supervisor = Supervisor(self.data_dir / "logs")
        for index in range(1, self.replicas.get("gateway", 1)):
            self.gateway_ports.setdefault(index, free_port())
        for service in SERVICES:
            for index in range(self.replicas.get(service, 1)):
                self.start_service(service, index)

    def env_for(self, service: str) -> tuple[dict[str, str], list[str]]:
        """One service's environment, and the variables it must not inherit (another's secrets).

        Each service gets a data directory of its own under the stack's: nothing there is shared. Its keys are
        those given to the stack (``PRIVATE_ENV`` keeps each with its owners), or its own development key files.
        """
        env = {**self.service_env(), **self.given_keys(), **self.service_envs.get(service, {}),
               "ERPILOT_DATA_DIR": str(self.data_dir / "services" / service)}
        if self.dev_key_pairs:
            from erpilot_platform import dev_keys

            env.update(dev_keys.service_env(self.data_dir, service, self.dev_key_pairs))
        withheld = [name for name, owners in PRIVATE_ENV.items() if service not in owners]
        for name in withheld:
            env.pop(name, None)
        return env, withheld

    def given_keys(self) -> dict[str, str]:
        """The pairs given as variables, each with its verify key (derived from the signing key when not given)."""
        from erpilot_platform import dev_keys
        from erpilot_platform.grants import encode_public_key, load_signing_key

        keys = {}
        for name, pair in dev_keys.PAIRS.items():
            if name in self.dev_key_pairs:
                continue
            signing = self.env.get(pair.signing_env) or os.environ[pair.signing_env]
            verify = self.env.get(pair.verify_env) or os.environ.get(pair.verify_env)
            keys[pair.signing_env] = signing
            keys[pair.verify_env] = verify or encode_public_key(load_signing_key(signing).public_key())
        return keys

    def start_service(self, service: str, index: int = 0) -> None:
        name = service if index == 0 else f"{service}-{index + 1}"
        argv = [sys.executable, "-m", "erpilot", "serve", service]
        env, withheld = self.env_for(service)
        if service == "gateway" and index > 0:
            env["ERPILOT_HTTP_PORT"] = str(self.gateway_ports[index])
        self.supervisor.start(name, argv, env=env, unset=withheld)

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Poll /readyz until every service answers; fail early if a service died."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            exits = self.supervisor.check()
            if exits:
                raise RuntimeError("a service stopped during start-up:\n" + "\n".join(map(str, exits)))
            try:
                if all(_ready(url) for url in self.gateway_urls):
                    return
            except Exception as exc:
                last = str(exc)
            time.sleep(0.3)
        raise TimeoutError(f"the stack was not ready after {timeout:.0f}s (last: {last})")

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop_all()



def _ready(base_url: str) -> bool:
    with urllib.request.urlopen(f"{base_url}/readyz", timeout=3) as response:
        return response.status == 200
