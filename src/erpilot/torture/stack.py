"""The stack of one `erpilot torture` campaign: started once, one service restarted per crash.

By default it runs on an embedded NATS server and PostgreSQL of its own; with ERPILOT_NATS_URL and
ERPILOT_DATABASE_URL it uses those servers (nothing else may write to them during the campaign: the
ledger checks compare the whole stock). The services run with a short JetStream ack wait, so a
message whose consumer was killed is really redelivered within the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
from dataclasses import dataclass, field
from pathlib import Path

import nats
import nats.js.errors
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from erpilot.stack import stack
from erpilot_platform.db import create_engine

# adjust_stock approvals expire quickly, so a campaign sees expiries without waiting 15 minutes.
POLICY = """\
[tools.submit_order]
stock_check = "sufficient"
[tools.adjust_stock]
ttl = "{expiry_ttl}s"
"""
OUTBOX_SCHEMAS = ("erp", "approval", "agent")


@dataclass
class TortureStack:
    data_dir: Path
    ack_wait: float = 2.0
    expiry_ttl: int = 4
    nats_url: str | None = None
    database_url: str | None = None
    secret: str = field(default_factory=lambda: "torture-" + secrets.token_hex(16))
    running: stack.Stack | None = None
    _embedded: list = field(default_factory=list)
    engine: AsyncEngine | None = None

    def start(self) -> None:
        from erpilot.stack.embedded import EmbeddedNats, EmbeddedPostgres

        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.nats_url:
            embedded = EmbeddedNats(self.data_dir / "nats")
            self._embedded.append(embedded)
            self.nats_url = embedded.start()
        if not self.database_url:
            embedded = EmbeddedPostgres(self.data_dir / "pg")
            self._embedded.append(embedded)
            self.database_url = embedded.start()
        stack.migrate_all(self.database_url)
        stack.seed(self.database_url)
        policy = self.data_dir / "policy.toml"
        policy.write_text(POLICY.format(expiry_ttl=self.expiry_ttl))
        self.running = stack.Stack(self.nats_url, self.database_url, self.data_dir, http_port=stack.free_port(), env={
            "ERPILOT_AUTH_SECRET": self.secret, "ERPILOT_POLICY": str(policy), "ERPILOT_LOG_LEVEL": "WARNING",
            "ERPILOT_ACK_WAIT_SECONDS": str(self.ack_wait), "ERPILOT_RECONCILE_AFTER_SECONDS": "1",
            "ERPILOT_RESUME_RUNS_AFTER_SECONDS": "1"}, service_envs={
            service: {"ERPILOT_FAILPOINTS_FILE": str(self.failpoints_file(service))} for service in stack.SERVICES})
        self.running.start()
        self.running.wait_ready(timeout=180)

    @property
    def base_url(self) -> str:
        return self.running.base_url

    def failpoints_file(self, service: str) -> Path:
        return self.data_dir / "failpoints" / service

    def arm(self, service: str, spec: str) -> None:
        """Arm failpoints in the running service (it reads its ERPILOT_FAILPOINTS_FILE when it changes)."""
        path = self.failpoints_file(service)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(spec)
        tmp.replace(path)  # atomically: a process never reads half a spec

    def disarm(self, service: str) -> None:
        self.failpoints_file(service).unlink(missing_ok=True)

    def restart(self, service: str) -> None:
        """Restart one service (disarmed) and wait until the whole stack answers."""
        self.disarm(service)
        self.running.supervisor.restart(service)
        self.running.wait_ready(timeout=180)

    def exit_code(self, service: str) -> int | None:
        """The exit status of a service that stopped (137 at a failpoint), None while it runs."""
        process = self.running.supervisor.children[service].process
        return None if process is None else process.poll()

    def kill(self, service: str) -> int:
        """SIGKILL what is left of the service's process group (the failpoint already exited)."""
        return self.running.supervisor.kill(service, signal.SIGKILL)

    def unexpected_exits(self, *, besides: str | None = None) -> list[str]:
        """The processes that exited unasked since the last look, but ``besides`` (the armed service, whose exit
        its crash path counts)."""
        return [str(e) for e in self.running.supervisor.check() if e.name != besides]

    # --- looking from outside -------------------------------------------------------------------
    def db(self) -> AsyncEngine:
        if self.engine is None:
            self.engine = create_engine(self.database_url, pool_size=2, application_name="erpilot-torture")
        return self.engine

    async def scalars(self, sql: str, **params: object) -> list:
        async with self.db().connect() as conn:
            return list((await conn.execute(text(sql), params)).all())

    async def backlog(self) -> dict[str, int]:
        """What is still in flight: outbox rows per service and unacknowledged JetStream messages."""
        found: dict[str, int] = {}
        for schema in OUTBOX_SCHEMAS:
            [(count,)] = await self.scalars(f"select count(*) from {schema}.outbox")
            if count:
                found[f"{schema}.outbox"] = count
        connection = await nats.connect(self.nats_url, connect_timeout=5)
        try:
            js = connection.jetstream()
            for info in await js.streams_info():
                if info.config.name == "ERPILOT_DEAD_LETTERS":
                    continue
                for consumer in await js.consumers_info(info.config.name):
                    waiting = (consumer.num_pending or 0) + (consumer.num_ack_pending or 0)
                    if waiting:
                        found[f"{info.config.name}/{consumer.name}"] = waiting
        finally:
            await connection.close()
        return found

    async def last_seqs(self) -> dict[str, int]:
        """The last sequence number of every stream (where a run's messages will begin)."""
        connection = await nats.connect(self.nats_url, connect_timeout=5)
        try:
            return {info.config.name: info.state.last_seq for info in await connection.jetstream().streams_info()}
        finally:
            await connection.close()

    async def messages_since(self, seqs: dict[str, int]) -> dict[str, list]:
        """Every message stored after `seqs` (from last_seqs), per stream: (subject, data, headers)."""
        connection = await nats.connect(self.nats_url, connect_timeout=5)
        found: dict[str, list] = {}
        try:
            js = connection.jetstream()
            for info in await js.streams_info():
                name = info.config.name
                first = max(seqs.get(name, 0) + 1, info.state.first_seq)
                for seq in range(first, info.state.last_seq + 1):
                    try:
                        msg = await js.get_msg(name, seq)
                    except nats.js.errors.NotFoundError:
                        continue  # removed (e.g. a work-queue message already handled)
                    found.setdefault(name, []).append((msg.subject, msg.data, msg.headers or {}))
        finally:
            await connection.close()
        return found

    async def session_events(self, session_id: str) -> list[dict]:
        """Every event of a session as the agent stores it, in seq order: the one store of session events (live
        delivery is core NATS, which keeps nothing)."""
        rows = await self.scalars("select seq, type, data from agent.session_events where session_id = :sid "
                                  "order by seq", sid=session_id)
        return [{"seq": seq, "type": type_, "data": data if isinstance(data, dict) else json.loads(data)}
                for seq, type_, data in rows]

    async def verify_audit(self) -> tuple[bool, str]:
        """What `erpilot audit verify` says of the approval service's audit chain: (intact, its report)."""
        from erpilot.ops import audit
        from erpilot_platform.grants import load_verify_key

        key = self.running.env_for("erp")[0]["ERPILOT_GRANT_VERIFY_KEY"]  # the ERP's: the approval signs with its pair
        return await audit.verify(self.nats_url, load_verify_key(key))

    async def wait_quiet(self, timeout: float) -> dict[str, int]:
        """Wait until nothing is in flight twice in a row; returns what was still in flight at the deadline."""
        deadline = asyncio.get_running_loop().time() + timeout
        quiet_checks = 0
        backlog: dict[str, int] = {}
        while asyncio.get_running_loop().time() < deadline:
            backlog = await self.backlog()
            quiet_checks = 0 if backlog else quiet_checks + 1
            if quiet_checks >= 2:
                return {}
            await asyncio.sleep(0.5)
        return backlog

    def stop(self) -> None:
        if self.running is not None:
            self.running.stop()
        for embedded in reversed(self._embedded):
            embedded.stop()


def from_environment(data_dir: Path, **options: object) -> TortureStack:
    """Given servers from ERPILOT_NATS_URL / ERPILOT_DATABASE_URL, else embedded ones."""
    return TortureStack(data_dir, nats_url=os.environ.get("ERPILOT_NATS_URL") or None,
                        database_url=os.environ.get("ERPILOT_DATABASE_URL") or None, **options)
