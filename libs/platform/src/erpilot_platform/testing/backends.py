"""Picks the NATS and PostgreSQL servers for integration tests: given URLs, Docker, or the embedded wheels.

Per server, in order:
- ERPILOT_TEST_NATS_URL / ERPILOT_TEST_DATABASE_URL: use that server. A database named
  erpilot_test_<random> is created on it for the run and dropped by stop(), so runs sharing a
  PostgreSQL server do not collide. NATS has no such isolation (the app names its streams): runs
  against one shared NATS server must not overlap.
- ERPILOT_TEST_BACKEND=docker: testcontainers, nats:2.12-alpine with -js and postgres:17-alpine.
- otherwise: EmbeddedNats / EmbeddedPostgres, a fresh pair per call, under tmp_dir (PostgreSQL under
  a /tmp/erpilot-test-pg-* dir when running as root, see postgres_scratch_dir).

Typical session fixture:

    @pytest.fixture(scope="session")
    def backend(tmp_path_factory):
        b = start_backend(tmp_path_factory.mktemp("backend"))
        yield b
        b.stop()
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from erpilot_platform.embedded import EmbeddedNats, EmbeddedPostgres

NATS_IMAGE = "nats:2.12-alpine"
POSTGRES_IMAGE = "postgres:17-alpine"
_SCRATCH_PREFIX = "erpilot-test-pg-"


@dataclass
class Backend:
    """URLs of the servers a test session uses, and how to release them."""

    nats_url: str = ""
    database_url: str = ""
    _cleanups: list[Callable[[], object]] = field(default_factory=list, repr=False)

    def stop(self) -> None:
        """Stop or drop what start_backend created, newest first; idempotent."""
        errors = []
        while self._cleanups:
            try:
                self._cleanups.pop()()
            except Exception as e:  # keep releasing the rest
                errors.append(e)
        if errors:
            raise errors[0]


def start_backend(tmp_dir: Path) -> Backend:
    """Start (or connect to) NATS and PostgreSQL for a test session; see the module docstring."""
    backend = Backend()
    try:
        backend.nats_url = _nats(Path(tmp_dir), backend)
        backend.database_url = _database(Path(tmp_dir), backend)
    except BaseException:
        backend.stop()
        raise
    return backend


def _docker() -> bool:
    return os.environ.get("ERPILOT_TEST_BACKEND", "embedded") == "docker"


def _nats(tmp_dir: Path, backend: Backend) -> str:
    if url := os.environ.get("ERPILOT_TEST_NATS_URL"):
        return url
    if _docker():
        try:  # optional: only the docker mode needs testcontainers
            from testcontainers.community.nats import NatsContainer
        except ImportError:  # before 4.15 it lived at the top level
            from testcontainers.nats import NatsContainer

        container = NatsContainer(NATS_IMAGE, jetstream=True).start()
        backend._cleanups.append(container.stop)
        return container.nats_uri()
    nats = EmbeddedNats(tmp_dir)
    backend._cleanups.append(nats.stop)
    return nats.start()


def _database(tmp_dir: Path, backend: Backend) -> str:
    if url := os.environ.get("ERPILOT_TEST_DATABASE_URL"):
        name = f"erpilot_test_{secrets.token_hex(4)}"
        execute_sql(url, f'create database "{name}"')
        backend._cleanups.append(lambda: execute_sql(url, f'drop database if exists "{name}" with (force)'))
        return with_database(url, name)
    if _docker():
        try:
            from testcontainers.community.postgres import PostgresContainer
        except ImportError:
            from testcontainers.postgres import PostgresContainer

        container = PostgresContainer(POSTGRES_IMAGE, driver=None).start()
        backend._cleanups.append(container.stop)
        return container.get_connection_url()
    pg_dir = postgres_scratch_dir() if os.geteuid() == 0 else tmp_dir
    if pg_dir != tmp_dir:
        backend._cleanups.append(lambda: shutil.rmtree(pg_dir, ignore_errors=True))
    postgres = EmbeddedPostgres(pg_dir)
    backend._cleanups.append(postgres.stop)
    return postgres.start()


def postgres_scratch_dir() -> Path:
    """A fresh dir for an embedded PostgreSQL outside pytest's tmp tree; removes those of dead runs.

    As root the server runs as another user, who must traverse every parent of its data dir, and
    any pytest session starting on the machine resets /tmp/pytest-of-root to 0700.
    """
    for old in Path(tempfile.gettempdir()).glob(f"{_SCRATCH_PREFIX}*"):
        # postgres.lock is held (flock) while an EmbeddedPostgres runs there, released when it dies.
        if time.time() - old.stat().st_mtime > 600 and not _locked(old / "postgres.lock"):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=_SCRATCH_PREFIX))


def _locked(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@contextmanager
def scratch_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new, empty database ``<prefix>_<random>`` on ``server_url``'s server for the body of the ``with``, dropped
    afterwards even while something is still connected: the URL of a database no other test touches."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    execute_sql(server_url, f'create database "{name}"')
    try:
        yield with_database(server_url, name)
    finally:
        execute_sql(server_url, f'drop database if exists "{name}" with (force)')


def with_database(url: str, name: str) -> str:
    """Return the libpq URL with its database replaced (host, user and query such as ?host=/dir kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def execute_sql(url: str, sql: str) -> None:
    """Run one statement (e.g. CREATE DATABASE) from sync code, even inside a running event loop."""
    _on_connection(url, lambda conn: conn.execute(sql))


def fetch_sql(url: str, sql: str, *args: object) -> list:
    """The rows of one query (``$1``… parameters), from sync code: tests read a ledger from outside."""
    return _on_connection(url, lambda conn: conn.fetch(sql, *args))


def _on_connection(url: str, work):
    import asyncpg

    async def run():
        # asyncpg wants a plain libpq scheme, not SQLAlchemy's postgresql+asyncpg://
        conn = await asyncpg.connect(re.sub(r"^postgres(ql)?\+\w+://", "postgresql://", url))
        try:
            return await work(conn)
        finally:
            await conn.close()

    # A fresh loop in a worker thread: the caller may itself be inside a running event loop.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()
