"""Plain `erpilot up` (no --secure) runs every service as its own PostgreSQL role, as production does
(src/erpilot/stack/db_roles.py), seen from outside: the services' environments and the server's sessions."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit

import asyncpg
import psutil
import pytest

from erpilot.stack.stack import free_port
from erpilot_platform.testing.backends import postgres_scratch_dir
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e
ROLES = {"gateway": "erpilot_gateway", "agent": "erpilot_agent", "approval": "erpilot_approval",
         "erp": "erpilot_erp"}


@pytest.fixture
def up_data_dir():
    """Outside pytest's tmp tree (see test_foundation_faults.up_data_dir: PostgreSQL may run as another user)."""
    path = postgres_scratch_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def service_processes(root: int) -> dict[str, psutil.Process]:
    found = {}
    for process in psutil.Process(root).children(recursive=True):
        command = process.cmdline()
        if command[-2:-1] == ["serve"]:
            found[command[-1]] = process
    return found


async def session_roles(owner_url: str) -> dict[str, set[str]]:
    """service -> the roles of its open connections, by application name ("erpilot-<service>[-<purpose>]")."""
    conn = await asyncpg.connect(owner_url)
    try:
        rows = await conn.fetch("SELECT DISTINCT application_name, usename FROM pg_stat_activity "
                                "WHERE datname = current_database() AND application_name LIKE 'erpilot-%'")
    finally:
        await conn.close()
    roles: dict[str, set[str]] = {}
    for row in rows:
        roles.setdefault(row["application_name"].split("-")[1], set()).add(row["usename"])
    return roles


def test_plain_erpilot_up_connects_every_service_as_its_own_database_role(up_data_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERPILOT_")}
    env["ERPILOT_DATA_DIR"] = str(up_data_dir)
    up = subprocess.Popen([sys.executable, "-m", "erpilot", "up", "--port", str(free_port())], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            line = up.stdout.readline()
            lines.append(line)
            if "Press Ctrl-C" in line or not line:
                break
        output = "".join(lines)
        assert "Erpilot is running." in output, output
        owner_url = re.search(r"database:\s+(\S+)", output).group(1)

        services = service_processes(up.pid)
        assert set(services) == set(ROLES)
        for service, process in services.items():
            assert urlsplit(process.environ()["ERPILOT_DATABASE_URL"]).username == ROLES[service], service

        expected = {service: {role} for service, role in ROLES.items() if service != "gateway"}  # it owns no table
        found = wait_for(lambda: (lambda roles: roles if set(roles) >= set(expected) else None)(
            asyncio.run(session_roles(owner_url))), timeout=60)
        assert found == expected
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
