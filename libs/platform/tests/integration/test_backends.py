"""start_backend: embedded servers by default, a fresh database on a given server, nothing left behind."""

import re
import shutil
import subprocess
import time
from pathlib import Path

import asyncpg
import nats
import pytest

from erpilot_platform.embedded import EmbeddedNats, EmbeddedPostgres
from erpilot_platform.testing import postgres_scratch_dir, start_backend, with_database

pytestmark = pytest.mark.integration


def _live_mentioning(text: str) -> set[int]:
    """Pids of live (non-zombie) processes whose command line contains `text`."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and text.encode() in (entry / "cmdline").read_bytes():
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.add(int(entry.name))
        except OSError:
            continue
    return found


def _wait_none_mentioning(text: str, timeout: float = 10.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while (left := _live_mentioning(text)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("ERPILOT_TEST_NATS_URL", "ERPILOT_TEST_DATABASE_URL", "ERPILOT_TEST_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


async def _publish_and_select(backend) -> None:
    nc = await nats.connect(backend.nats_url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="BACKEND_TEST", subjects=["backend.test.>"])
        ack = await js.publish("backend.test.x", b"1")
        assert ack.stream == "BACKEND_TEST"
    finally:
        await nc.close()
    conn = await asyncpg.connect(backend.database_url)
    try:
        assert await conn.fetchval("select 1") == 1
    finally:
        await conn.close()


async def test_embedded_by_default(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    backend = start_backend(tmp_path)
    try:
        assert re.match(r"postgresql://postgres:[\w-]+@/erpilot\?host=", backend.database_url)
        await _publish_and_select(backend)
        pg_dir = backend.database_url.split("host=")[1]
        assert _live_mentioning(str(tmp_path)) and _live_mentioning(pg_dir)
    finally:
        backend.stop()
    backend.stop()  # idempotent
    assert not _wait_none_mentioning(str(tmp_path)) and not _wait_none_mentioning(pg_dir)
    assert not Path(pg_dir).exists() or pg_dir.startswith(str(tmp_path))  # the scratch dir is removed


async def test_given_servers_get_a_fresh_database(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    # Stand-ins for the machine's shared servers: embedded ones we own, so the test stays self-contained.
    pg_dir = postgres_scratch_dir()
    shared_pg, shared_nats = EmbeddedPostgres(pg_dir, database="shared"), EmbeddedNats(tmp_path / "nats")
    try:
        clean_env.setenv("ERPILOT_TEST_DATABASE_URL", shared_pg.start())
        clean_env.setenv("ERPILOT_TEST_NATS_URL", shared_nats.start())
        backend = start_backend(tmp_path / "unused")
        try:
            assert backend.nats_url == shared_nats.url
            name = backend.database_url.split("/")[3].split("?")[0]
            assert name.startswith("erpilot_test_")
            await _publish_and_select(backend)
        finally:
            backend.stop()
        conn = await asyncpg.connect(shared_pg.url)
        try:
            assert not await conn.fetchval("select count(*) from pg_database where datname = $1", name)
        finally:
            await conn.close()
        assert shared_nats.process.poll() is None  # a given server is not ours to stop
    finally:
        shared_nats.stop()
        shared_pg.stop()
        shutil.rmtree(pg_dir, ignore_errors=True)


def test_with_database_keeps_host_and_query() -> None:
    assert with_database("postgresql://postgres@/erpilot?host=/tmp/x", "t1") == "postgresql://postgres@/t1?host=/tmp/x"
    assert with_database("postgresql+asyncpg://u:p@h:5433/db", "t2") == "postgresql+asyncpg://u:p@h:5433/t2"
    assert with_database("postgresql://u@h", "t3") == "postgresql://u@h/t3"


def _docker_available() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _docker_available(), reason="no Docker daemon")
async def test_docker_backend(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ERPILOT_TEST_BACKEND", "docker")
    backend = start_backend(tmp_path)
    try:
        await _publish_and_select(backend)
    finally:
        backend.stop()
