"""Credentials of the least-privilege NATS users (``nats_security`` defines the users and their rights):
passwords for `erpilot up --secure` or from the environment, per-service settings, and the JetStream
migration (streams and durable consumers) as the admin user."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from functools import partial
from pathlib import Path

from erpilot.stack.nats_security import JS_DOMAIN, SERVICES, USERS, password_variable

PASSWORDS_FILE = "nats-passwords.json"


def load_or_create_passwords(data_dir: Path) -> dict[str, str]:
    """Random passwords for every user, kept in ``data_dir/nats-passwords.json`` (mode 0600)."""
    path = Path(data_dir) / PASSWORDS_FILE
    if path.exists():
        path.chmod(0o600)
        stored = json.loads(path.read_text())
        if set(stored) >= set(USERS):
            return {user: stored[user] for user in USERS}
        path.unlink()
    passwords = {user: secrets.token_urlsafe(24) for user in USERS}
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        json.dump(passwords, f, indent=2)
    return passwords


def passwords_from_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Passwords of an externally run server configured with ``erpilot nats-config`` (raises if missing)."""
    missing = [password_variable(user) for user in USERS if not environ.get(password_variable(user))]
    if missing:
        raise RuntimeError("set " + ", ".join(missing))
    return {user: environ[password_variable(user)] for user in USERS}


def service_credentials(passwords: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Per-service environment: its own ERPILOT_NATS_USER / ERPILOT_NATS_PASSWORD."""
    return {service: {"ERPILOT_NATS_USER": service, "ERPILOT_NATS_PASSWORD": passwords[service]}
            for service in SERVICES}


def all_durables() -> list:
    """Every durable consumer of every service (``nats_security.TRAFFIC``), for the JetStream migration."""
    from erpilot.stack.nats_security import consumers
    from erpilot_platform.jetstream import Durable

    return [Durable(c.stream, c.subject, c.durable) for service in SERVICES for c in consumers(service)]


async def migrate_jetstream_on(js, *, replicas: int = 1, environ=None) -> list[str]:
    """The JetStream migration (``erpilot_platform.jetstream``) through an open JetStream context.

    ``environ`` is the services' environment (ack wait, retry budget); by default this process's."""
    from erpilot_platform.jetstream import deployment_consumer_settings, migrate

    return await migrate(js, all_durables(), replicas=replicas,
                         consumer_settings=deployment_consumer_settings(environ))


async def migrate_jetstream(nats_url: str, *, user: str | None = None, password: str | None = None,
                            replicas: int = 1, environ=None) -> tuple[str, list[str]]:
    """Declare every stream and durable consumer as ``admin``: through the JetStream domain API when the
    server has the domain, else the plain API. Returns which, and what was created or changed."""
    import nats.errors
    import nats.js.errors
    from faststream.nats import NatsBroker
    from faststream.security import SASLPlaintext

    servers = [url.strip() for url in nats_url.split(",")]
    security = SASLPlaintext(username=user, password=password) if user else None
    for js_options in ({"domain": JS_DOMAIN}, {}):
        broker = NatsBroker(servers, security=security, js_options=js_options, connect_timeout=5,
                            max_reconnect_attempts=5)
        await broker.connect()
        try:
            js = broker.config.connection_state.stream
            if js_options:
                try:
                    await js.account_info()
                except (nats.errors.NoRespondersError, nats.errors.TimeoutError,
                        nats.js.errors.ServiceUnavailableError):
                    continue  # no such domain on this server
            done = await _retrying(partial(migrate_jetstream_on, js, replicas=replicas, environ=environ))
            return (f"domain {JS_DOMAIN}" if js_options else "default API"), done
        finally:
            await broker.stop()
    raise AssertionError("unreachable")


async def _retrying(run, *, seconds: float = 60.0):
    """Retry while the JetStream API does not answer (a cluster electing a leader after a node died)."""
    import asyncio

    import nats.errors
    import nats.js.errors

    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + seconds
    while True:
        try:
            return await run()
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError):
            if loop.time() > give_up_at:
                raise
            await asyncio.sleep(0.5)
