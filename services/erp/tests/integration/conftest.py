"""The ERP running in-process (``build(...).start()``) against real NATS and PostgreSQL.

Tests talk to it only over NATS with the contracts (``erp`` fixture, an ``ErpClient``), and look at the
database directly only to set up rows (unique SKUs and customers per test) and to count effects.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.js.api import ConsumerConfig, DeliverPolicy
from sqlalchemy import func, select

from erpilot.stack.supervisor import Supervisor
from erpilot_contracts import subjects
from erpilot_contracts.approval.v1 import GrantV1
from erpilot_contracts.base import Message, ReplyV1
from erpilot_contracts.erp.v1 import (
    CommitOperationV1,
    ErpViewV1,
    ExecuteToolV1,
    GetOperationV1,
    PrepareOperationV1,
    UpdateProductV1,
)
from erpilot_contracts.fingerprint import fingerprint
from erpilot_contracts.subjects import COMMANDS_STREAM
from erpilot_contracts.tools.v1 import normalise
from erpilot_erp.adapters.tables import customers, draft_revisions, drafts, operations, orders, products
from erpilot_erp.app import build
from erpilot_erp.settings import ErpSettings
from erpilot_platform.assertions import sign_assertion
from erpilot_platform.broker import request
from erpilot_platform.db import create_engine
from erpilot_platform.grants import encode_public_key, encode_signing_key, sign_grant
from erpilot_platform.testing.readiness import wait_answering

SIGNING_KEY = Ed25519PrivateKey.generate()
ASSERTION_KEY = Ed25519PrivateKey.generate()  # the gateway's, for the requester assertions the client sends
LEDGER_KEY = Ed25519PrivateKey.generate()  # the ERP's own: it signs the approval requests it outboxes
REQUESTER = "tester"


# The chat run the tests' calls belong to (``<RUN>:call-…``): its assertion covers every one of them.
RUN = "run-erp-tests"


def call_uid() -> str:
    return f"{RUN}:{uid('call-')}"


def assertion(session_id: str, *, sub: str = REQUESTER, key: Ed25519PrivateKey = ASSERTION_KEY, **kw: Any) -> str:
    """The gateway's requester assertion for ``sub`` in ``session_id``, for the run ``RUN`` (or ``call_id=``)."""
    bound = {} if "call_id" in kw or "run_id" in kw else {"run_id": RUN}
    return sign_assertion(key, sub=sub, roles=["requester"], session_id=session_id, **bound, **kw)


def uid(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


class ErpClient:
    """Speaks to the ERP over NATS with the contracts; sets up and inspects rows directly."""

    def __init__(self, broker: Any, engine: Any):
        self.broker = broker
        self.engine = engine

    # --- over NATS ----------------------------------------------------------------------------------
    async def send(self, subject: str, payload: Message, *, durable: bool | None = None) -> ReplyV1:
        # As the subject says it travels: a command through the stream, a retried command (req.erp.draft) or a
        # query as a core request.
        durable = ".cmd." in subject if durable is None else durable
        return await request(self.broker, subject, payload, durable=durable, timeout=20)

    async def send_raw(self, subject: str, body: bytes, *, durable: bool | None = None) -> ReplyV1:
        stream = COMMANDS_STREAM.name if (".cmd." in subject if durable is None else durable) else None
        response = await self.broker.request(body, subject, stream=stream, timeout=20)
        return ReplyV1.model_validate_json(response.body)

    def draft_cmd(self, tool: str, arguments: dict, *, session_id: str, operation_id: str | None = None
                  ) -> ExecuteToolV1:
        return ExecuteToolV1(session_id=session_id, call_id=call_uid(), operation_id=operation_id or uid("op-"),
                             tool=tool, arguments=arguments, requested_by=REQUESTER, assertion=assertion(session_id))

    def read_cmd(self, tool: str, arguments: dict, *, session_id: str) -> ExecuteToolV1:
        return ExecuteToolV1(session_id=session_id, call_id=call_uid(), operation_id=uid("op-"), tool=tool,
                             arguments=arguments, requested_by=REQUESTER, assertion=assertion(session_id))

    async def draft(self, tool: str, arguments: dict, *, session_id: str, operation_id: str | None = None
                    ) -> ReplyV1:
        return await self.send(subjects.ERP_REQ_DRAFT,
                               self.draft_cmd(tool, arguments, session_id=session_id, operation_id=operation_id))

    async def new_draft(self, session_id: str, customer_id: str, lines: list[tuple[str, int]]) -> dict:
        reply = await self.draft("create_order_draft", {
            "customer_id": customer_id, "lines": [{"sku": s, "qty": q} for s, q in lines]}, session_id=session_id)
        assert reply.ok and reply.data["outcome"] == "succeeded", reply
        return reply.data["result"]

    def prepare_cmd(self, tool: str, arguments: dict, *, session_id: str, operation_id: str | None = None,
                    stock_check: str | None = None) -> PrepareOperationV1:
        args = normalise(tool, arguments)
        return PrepareOperationV1(
            operation_id=operation_id or uid("op-"), session_id=session_id, call_id=call_uid(), tool=tool,
            arguments=args, fingerprint=fingerprint(tool, 1, args), requested_by=REQUESTER, stock_check=stock_check,
            assertion=assertion(session_id))

    async def prepare(self, tool: str, arguments: dict, *, session_id: str, **kw: Any) -> PrepareOperationV1:
        """Prepare and expect success; returns the command (operation_id, fingerprint)."""
        cmd = self.prepare_cmd(tool, arguments, session_id=session_id, **kw)
        reply = await self.send(subjects.ERP_CMD_PREPARE, cmd)
        assert reply.ok, reply
        return cmd

    @staticmethod
    def grant(operation_id: str, fingerprint_: str, *, key: Ed25519PrivateKey = SIGNING_KEY,
              pending_id: str | None = None, stock_check: str | None = None) -> GrantV1:
        unsigned = GrantV1(pending_id=pending_id or uid("pa-"), operation_id=operation_id, fingerprint=fingerprint_,
                           decided_by="approver-1", decided_at=datetime.now(UTC), stock_check=stock_check)
        return sign_grant(unsigned, key)

    async def commit(self, operation_id: str, grant: GrantV1) -> ReplyV1:
        return await self.send(subjects.ERP_CMD_COMMIT, CommitOperationV1(operation_id=operation_id, grant=grant))

    async def approve_and_commit(self, cmd: PrepareOperationV1, **grant_kw: Any) -> ReplyV1:
        return await self.commit(cmd.operation_id, self.grant(cmd.operation_id, cmd.fingerprint, **grant_kw))

    async def operation(self, operation_id: str) -> ReplyV1:
        return await self.send(subjects.ERP_QUERY_OPERATION, GetOperationV1(operation_id=operation_id), durable=False)

    async def view(self, view: str, **kw: Any) -> ReplyV1:
        return await self.send(subjects.ERP_QUERY_VIEW, ErpViewV1(view=view, **kw), durable=False)

    async def update_product(self, sku: str, **kw: Any) -> ReplyV1:
        kw.setdefault("request_id", uid("rq-"))  # every change names itself before it is first published
        return await self.send(subjects.ERP_CMD_UPDATE_PRODUCT, UpdateProductV1(sku=sku, updated_by="admin", **kw))

    # --- rows ---------------------------------------------------------------------------------------
    async def make_product(self, *, on_hand: int = 10, price_minor: int = 1000, status: str = "active") -> str:
        sku = uid("SKU-T-")
        async with self.engine.begin() as conn:
            await conn.execute(products.insert().values(sku=sku, name=f"Test item {sku}", status=status,
                                                        price_minor=price_minor, currency="EUR", on_hand=on_hand))
        return sku

    async def make_customer(self, *, discount_pct: int = 0) -> str:
        customer_id = uid("C-T-")
        async with self.engine.begin() as conn:
            await conn.execute(customers.insert().values(customer_id=customer_id, name=f"Customer {customer_id}",
                                                         discount_pct=discount_pct))
        return customer_id

    async def on_hand(self, sku: str) -> int:
        async with self.engine.connect() as conn:
            return await conn.scalar(select(products.c.on_hand).where(products.c.sku == sku))

    async def orders_of_draft(self, draft_id: str) -> int:
        async with self.engine.connect() as conn:
            return await conn.scalar(select(func.count()).select_from(orders).where(orders.c.draft_id == draft_id))

    async def drafts_of_session(self, session_id: str) -> int:
        async with self.engine.connect() as conn:
            return await conn.scalar(select(func.count()).select_from(drafts).where(drafts.c.session_id == session_id))

    async def revisions_of(self, draft_id: str) -> int:
        async with self.engine.connect() as conn:
            return await conn.scalar(select(func.count()).select_from(draft_revisions)
                                     .where(draft_revisions.c.draft_id == draft_id))

    async def approval_requests(self, operation_id: str) -> list[dict]:
        """The ``cmd.approval.request`` messages of ``operation_id`` in the command stream (its message id names it;
        nothing consumes them in these tests)."""
        js = self.broker.config.connection_state.stream
        found = []
        sub = await js.subscribe(subjects.APPROVAL_CMD_REQUEST, ordered_consumer=True,
                                 config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL))
        try:
            while True:
                try:
                    message = await sub.next_msg(timeout=0.5)
                except TimeoutError:
                    return found
                if message.headers.get("Nats-Msg-Id", "").startswith(f"approval.request.{operation_id}."):
                    found.append(json.loads(message.data))
        finally:
            await sub.unsubscribe()

    async def operation_row(self, operation_id: str) -> Any:
        async with self.engine.connect() as conn:
            return (await conn.execute(select(operations).where(operations.c.operation_id == operation_id))).first()


@pytest.fixture(scope="session")
def verify_key() -> str:
    """ERPILOT_GRANT_VERIFY_KEY matching the key ``ErpClient.grant`` signs with."""
    return encode_public_key(SIGNING_KEY.public_key())


@pytest.fixture(scope="session")
def assertion_verify_key() -> str:
    """ERPILOT_ASSERTION_VERIFY_KEY matching the key the client's requester assertions are signed with."""
    return encode_public_key(ASSERTION_KEY.public_key())


@pytest.fixture(scope="session")
def ledger_signing_key() -> str:
    """ERPILOT_LEDGER_SIGNING_KEY: ``LEDGER_KEY``, whose public half verifies the requests the ERP sends."""
    return encode_signing_key(LEDGER_KEY)


@pytest.fixture(scope="module")
async def erp_client(broker, database_url) -> ErpClient:
    """A client of whatever ERP is listening (no ERP started here)."""
    engine = create_engine(database_url, pool_size=2, application_name="erp-tests")
    yield ErpClient(broker, engine)
    await engine.dispose()


@pytest.fixture(scope="module")
async def erp_app(database_url, nats_url, tmp_path_factory, verify_key, assertion_verify_key, ledger_signing_key):
    settings = ErpSettings(nats_url=nats_url, database_url=database_url,
                           data_dir=tmp_path_factory.mktemp("erp-data"), grant_verify_key=verify_key,
                           assertion_verify_key=assertion_verify_key, ledger_signing_key=ledger_signing_key)
    app = build(settings)
    await app.start()
    yield app
    await app.stop()


@pytest.fixture(scope="module")
async def erp(erp_app, erp_client) -> ErpClient:
    """A client of the ERP running in this process for the module."""
    return erp_client


@pytest.fixture
def session_id() -> str:
    return uid("S-")


class ErpProcess:
    """The ERP as a process of its own (``erpilot serve erp``), for the crash tests: armed failpoints kill it."""

    def __init__(self, supervisor: Supervisor, client: ErpClient, env: dict[str, str]):
        self.supervisor, self.client, self.env = supervisor, client, env

    async def start(self, failpoints: str | None = None) -> None:
        env = {**self.env, **({"ERPILOT_FAILPOINTS": failpoints} if failpoints else {})}
        self.supervisor.start("erp", [sys.executable, "-m", "erpilot", "serve", "erp"], env=env)
        await wait_answering(self.client.broker, "erp", self._check_running)

    def _check_running(self) -> None:
        assert self.supervisor.children["erp"].running(), self.supervisor.check()

    async def exit_status(self, timeout: float = 30.0) -> int:
        return await asyncio.to_thread(self.supervisor.children["erp"].process.wait, timeout)


@pytest.fixture
def erp_process(database_url, nats_url, erp_client, verify_key, assertion_verify_key, ledger_signing_key, tmp_path):
    supervisor = Supervisor(tmp_path / "logs")
    env = {"ERPILOT_NATS_URL": nats_url, "ERPILOT_DATABASE_URL": database_url, "ERPILOT_DATA_DIR": str(tmp_path),
           "ERPILOT_GRANT_VERIFY_KEY": verify_key, "ERPILOT_ASSERTION_VERIFY_KEY": assertion_verify_key,
           "ERPILOT_LEDGER_SIGNING_KEY": ledger_signing_key}
    yield ErpProcess(supervisor, erp_client, env)
    supervisor.stop_all()
