"""The whole Erpilot stack on one machine: infrastructure, migrations, seed, services as processes.

Used by `erpilot up` and by the e2e tests, so both run exactly the same way.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from erpilot.supervisor import Supervisor

SERVICES = ("erp", "approval", "agent", "gateway")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def migrate_all(database_url: str) -> None:
    """Bring every service's schema to head (each has its own Alembic history)."""
    from erpilot_agent.app import MIGRATIONS as AGENT
    from erpilot_approval.app import MIGRATIONS as APPROVAL
    from erpilot_erp.app import MIGRATIONS as ERP
    from erpilot_platform.migrations import upgrade

    for location, schema in ((ERP, "erp"), (APPROVAL, "approval"), (AGENT, "agent")):
        upgrade(location, database_url, schema)


def seed(database_url: str) -> dict[str, int]:
    from erpilot_erp.adapters.seed import load_demo_catalog
    from erpilot_platform.db import create_engine

    async def run() -> dict[str, int]:
        engine = create_engine(database_url, pool_size=1)
        try:
            return await load_demo_catalog(engine)
        finally:
            await engine.dispose()

    return asyncio.run(run())


@dataclass
class Stack:
    """Service processes against given NATS and PostgreSQL URLs."""

    nats_url: str
    database_url: str
    data_dir: Path
    http_port: int = 8000
    env: dict[str, str] = field(default_factory=dict)
    # Per-service additions to ``env`` (e.g. each service's own NATS user under `erpilot up --secure`).
    service_envs: dict[str, dict[str, str]] = field(default_factory=dict)
    replicas: dict[str, int] = field(default_factory=dict)
    supervisor: Supervisor | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def service_env(self) -> dict[str, str]:
        return {
            "ERPILOT_NATS_URL": self.nats_url,
            "ERPILOT_DATABASE_URL": self.database_url,
            "ERPILOT_DATA_DIR": str(self.data_dir),
            "ERPILOT_HTTP_PORT": str(self.http_port),
            "ERPILOT_PUBLIC_URL": self.env.get("ERPILOT_PUBLIC_URL", self.base_url),
            **self.env,
        }

    def start(self) -> None:
        self.supervisor = Supervisor(self.data_dir / "logs")
        for service in SERVICES:
            for index in range(self.replicas.get(service, 1)):
                self.start_service(service, index)

    def start_service(self, service: str, index: int = 0) -> None:
        name = service if index == 0 else f"{service}-{index + 1}"
        argv = [sys.executable, "-m", "erpilot", "serve", service]
        self.supervisor.start(name, argv, env={**self.service_env(), **self.service_envs.get(service, {})})

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Poll /readyz until every service answers; fail early if a service died."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            exits = self.supervisor.check()
            if exits:
                raise RuntimeError("a service stopped during start-up:\n" + "\n".join(map(str, exits)))
            try:
                with urllib.request.urlopen(f"{self.base_url}/readyz", timeout=3) as response:
                    if response.status == 200:
                        return
            except Exception as exc:
                last = str(exc)
            time.sleep(0.3)
        raise TimeoutError(f"the stack was not ready after {timeout:.0f}s (last: {last})")

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop_all()

