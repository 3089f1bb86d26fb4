"""E2E fixtures: the services run as separate processes (exactly as `erpilot up` runs them) and the
tests talk to them only through HTTP and NATS."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from erpilot.stack import db_roles
from erpilot.stack.stack import Stack, free_port, migrate_all, seed
from erpilot.stack.tokens import make_token
from erpilot_platform.embedded import EmbeddedNats, EmbeddedNatsCluster
from erpilot_platform.testing.backends import scratch_database

SECRET = "e2e-secret-" + "x" * 32
# Roles are global to the PostgreSQL server: every stack of this run sets the same passwords.
DB_PASSWORDS = db_roles.passwords_or_new()


@pytest.fixture(scope="session")
def stack(database_url, tmp_path_factory):
    """One stack for the e2e and browser sessions, with its own NATS server and database.

    Integration tests run services in-process on the session's NATS server and database; their
    durable consumers, unacknowledged messages and background loops must never meet this stack's
    services, so it gets servers of its own. Tests isolate themselves with fresh sessions and ids.
    """
    data_dir = tmp_path_factory.mktemp("stack")
    # A short deadline to watch expiry happen.
    with isolated_stack(database_url, data_dir, {}, policy='[tools.adjust_stock]\nttl = "3s"\n') as running:
        yield running


@contextmanager
def isolated_stack(database_url: str, data_dir: Path, env: dict[str, str],
                   replicas: dict[str, int] | None = None, *, cluster: int = 0,
                   policy: str | None = None) -> Iterator[Stack]:
    """A whole stack with its own NATS server (``cluster``: a cluster of that many nodes, streams with as
    many replicas) and database (on the session's PostgreSQL server); ``stack.nats`` is the server.
    ``policy``: the text of the approval policy it runs under (``ERPILOT_POLICY``), else the default.

    As deployed: migrated by the owner (database and JetStream), then every service connects as its own
    role (src/erpilot/stack/db_roles.py).
    """
    if policy is not None:
        (data_dir / "policy.toml").write_text(policy)
        env = {**env, "ERPILOT_POLICY": str(data_dir / "policy.toml")}
    # Always embedded: only this stack may consume from it.
    nats = EmbeddedNatsCluster(data_dir / "nats-cluster", cluster) if cluster else EmbeddedNats(data_dir / "nats-home")
    stack = None
    with scratch_database(database_url, "erpilot_iso") as url:
        try:
            migrate_all(url)
            db_roles.provision(url, DB_PASSWORDS)
            seed(url)
            stack = Stack(nats.start(), url, data_dir, http_port=free_port(),
                          env={"ERPILOT_AUTH_SECRET": SECRET, **env}, replicas=replicas or {},
                          service_envs=db_roles.role_envs(url, DB_PASSWORDS), nats_replicas=cluster or 1)
            stack.nats = nats
            stack.start()
            stack.wait_ready()
            yield stack
        finally:
            if stack is not None:
                stack.stop()
            nats.stop()


@contextmanager
def serving(server: Any) -> Iterator[Any]:
    """An http.server (a webhook receiver) answering on a thread of its own until the block ends."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def restart_armed(stack: Stack, service: str, failpoints: str | None) -> None:
    """(Re)start ``service`` with these failpoints armed (``ERPILOT_FAILPOINTS``, e.g. ``"erp.x=crash"``; None:
    disarmed) and wait until the stack answers."""
    child = stack.supervisor.children[service]
    if failpoints:
        child.env["ERPILOT_FAILPOINTS"] = failpoints
    else:
        child.env.pop("ERPILOT_FAILPOINTS", None)
    stack.supervisor.restart(service)
    stack.wait_ready()


def died_at_its_failpoint(stack: Stack, service: str, *, timeout: float) -> None:
    """Wait until the armed ``service`` died at its failpoint: exit 137 (SIGKILL), not of something else."""
    child = stack.supervisor.children[service]
    assert wait_for(lambda: child.process.poll() is not None, timeout=timeout)
    assert child.process.returncode == 137


def token(sub: str, *roles: str) -> str:
    return make_token(SECRET, sub, list(roles))


class Api:
    """A user of the HTTP API with one token."""

    def __init__(self, base_url: str, sub: str, *roles: str):
        self.sub = sub
        self.client = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token(sub, *roles)}"},
                                   timeout=30)

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return self.client.post(path, json=body if body is not None else {})

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.client.get(path, params=params)

    def new_session(self) -> str:
        response = self.post("/v1/sessions", {})
        assert response.status_code == 201, response.text
        return response.json()["session_id"]

    def call(self, session_id: str, tool: str, arguments: dict, **extra: Any) -> httpx.Response:
        return self.post(f"/v1/sessions/{session_id}/tool-calls", {"tool": tool, "arguments": arguments, **extra})

    def events(self, session_id: str, *, last_event_id: int | None = None, until: Callable[[list[dict]], bool],
               timeout: float = 20.0) -> list[dict]:
        """Read the session's SSE stream until ``until(events)`` holds (or fail after ``timeout``)."""
        headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
        events: list[dict] = []
        deadline = time.monotonic() + timeout
        with self.client.stream("GET", f"/v1/sessions/{session_id}/events", headers=headers,
                                timeout=httpx.Timeout(timeout, read=timeout)) as response:
            assert response.status_code == 200, response.read()
            current: dict[str, str] = {}
            for line in response.iter_lines():
                if line.startswith(("id:", "event:", "data:")):
                    key, _, value = line.partition(":")
                    current[key] = value.strip()
                elif line == "" and "data" in current:
                    event = json.loads(current["data"])
                    assert current["id"] == str(event["seq"]) and current["event"] == event["type"]
                    events.append(event)
                    current = {}
                    if until(events):
                        return events
                if time.monotonic() > deadline:
                    break
        raise AssertionError(f"condition not met within {timeout}s; events: {[e['type'] for e in events]}")


def wait_for(check: Callable[[], Any], *, timeout: float = 20.0, interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last: {value!r})")
        time.sleep(interval)


@pytest.fixture
def requester(stack) -> Api:
    return Api(stack.base_url, f"req-{time.monotonic_ns()}", "requester")


@pytest.fixture
def approver(stack) -> Api:
    return Api(stack.base_url, f"appr-{time.monotonic_ns()}", "approver")


@pytest.fixture
def manager(stack) -> Api:
    return Api(stack.base_url, f"mgr-{time.monotonic_ns()}", "manager")


@pytest.fixture
def admin(stack) -> Api:
    return Api(stack.base_url, f"admin-{time.monotonic_ns()}", "admin", "requester")
