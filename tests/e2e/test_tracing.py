"""One tool call is one trace (docs/ARCHITECTURE.md, "Tracing"), and its commit and decision are measured.

ERP, approval and agent run in-process (``build(...).start()``) with the gateway app (through
``httpx.ASGITransport``), on a NATS server and a database of this module's own: durable consumers are
named per service, so sharing the e2e stack's NATS would steal its messages. Spans go to an in-memory
exporter, metrics to an in-memory reader, on the process's providers.
"""

from __future__ import annotations

import asyncio
import os
import time
from unittest.mock import patch

import httpx
import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from erpilot.stack.nats_credentials import migrate_jetstream
from erpilot.stack.stack import migrate_all, seed
from erpilot.stack.tokens import make_token
from erpilot_platform.embedded import EmbeddedNats
from erpilot_platform.runtime import connect_with_retry
from erpilot_platform.testing.backends import scratch_database

pytestmark = pytest.mark.integration
SECRET = "tracing-secret-" + "x" * 32
TOOL_CALL_ROUTE = "/v1/sessions/{session_id}/tool-calls"
DECISION_ROUTE = "/v1/approvals/{pending_id}/decision"


@pytest.fixture(scope="module")
def spans():
    """Collect this module's spans in memory.

    OpenTelemetry lets a process set its tracer provider once: install an SDK provider if none is set
    (before any service is built), and stop the exporter afterwards, so later tests only pay for
    spans nobody keeps.
    """
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


@pytest.fixture(scope="module")
def measured() -> InMemoryMetricReader | None:
    """An in-memory reader on the process's meter provider, if this module is the one to install it."""
    if isinstance(metrics.get_meter_provider(), MeterProvider):
        return None  # readers are fixed when a provider is made: the metric test is skipped
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return reader


@pytest.fixture(scope="module")
def infra(database_url, tmp_path_factory):
    """(nats_url, database_url, data_dir): a NATS server and a migrated, seeded database of our own."""
    data_dir = tmp_path_factory.mktemp("tracing")
    nats = EmbeddedNats(data_dir / "nats-home")
    with scratch_database(database_url, "erpilot_trace") as url:
        try:
            migrate_all(url)
            seed(url)
            nats_url = nats.start()
            asyncio.run(migrate_jetstream(nats_url))  # streams and consumers, as `erpilot migrate` declares them
            yield nats_url, url, data_dir
        finally:
            nats.stop()


@pytest.fixture(scope="module")
async def gateway(spans, measured, infra):
    """Every service in this process; yields the gateway's ASGI app, its broker connected."""
    from erpilot_agent.app import build as build_agent
    from erpilot_agent.settings import AgentSettings
    from erpilot_approval.app import build as build_approval
    from erpilot_approval.settings import ApprovalSettings
    from erpilot_erp.app import build as build_erp
    from erpilot_erp.settings import ErpSettings
    from erpilot_gateway.app import create_app
    from erpilot_gateway.settings import GatewaySettings
    from erpilot_platform.grants import new_keypair_env

    nats_url, database_url, data_dir = infra
    common = dict(nats_url=nats_url, database_url=database_url, data_dir=data_dir)
    keys, vouching, ledger = new_keypair_env(), new_keypair_env("ERPILOT_ASSERTION"), new_keypair_env("ERPILOT_LEDGER")
    verify = vouching["ERPILOT_ASSERTION_VERIFY_KEY"]
    # The pending gauge's count runs only where metrics go somewhere (issue 13: idle cost); this process's
    # meter provider is the test's in-memory reader, so say an exporter is configured while the service is built.
    with patch.dict(os.environ, {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:9/v1/metrics"}):
        services = [build_erp(ErpSettings(**common, grant_verify_key=keys["ERPILOT_GRANT_VERIFY_KEY"],
                                          assertion_verify_key=verify,
                                          ledger_signing_key=ledger["ERPILOT_LEDGER_SIGNING_KEY"])),
                    build_approval(ApprovalSettings(**common, grant_signing_key=keys["ERPILOT_GRANT_SIGNING_KEY"],
                                                    assertion_verify_key=verify,
                                                    ledger_verify_key=ledger["ERPILOT_LEDGER_VERIFY_KEY"])),
                    build_agent(AgentSettings(**common, model="rules"))]
    app = create_app(GatewaySettings(nats_url=nats_url, data_dir=data_dir, auth_secret=SECRET,
                                     assertion_signing_key=vouching["ERPILOT_ASSERTION_SIGNING_KEY"]))
    started = []
    try:
        for service in services:
            await service.start()
            started.append(service)
        await connect_with_retry(app.state.broker)
        yield app
    finally:
        await app.state.broker.stop()
        for service in reversed(started):
            await service.stop()


def client(app, sub: str, *roles: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway", timeout=30,
                             headers={"Authorization": f"Bearer {make_token(SECRET, sub, list(roles))}"})


async def finished_call(requester: httpx.AsyncClient, session_id: str, call_id: str) -> dict:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        view = (await requester.get(f"/v1/sessions/{session_id}/tool-calls/{call_id}")).json()
        if view["status"] == "finished":
            return view
        await asyncio.sleep(0.1)
    raise AssertionError(f"call {call_id} did not finish: {view}")


async def spans_until(exporter: InMemorySpanExporter, found, timeout: float = 10.0):
    """The finished spans once ``found(spans)`` holds (handler spans end just after their replies)."""
    deadline = time.monotonic() + timeout
    while True:
        finished = exporter.get_finished_spans()
        if found(finished) or time.monotonic() > deadline:
            return finished
        await asyncio.sleep(0.05)


def http_span(finished, route: str):
    (span,) = [s for s in finished if s.kind is SpanKind.SERVER and s.attributes.get("http.route") == route
               and s.attributes.get("erpilot.service") == "gateway"]
    return span


@pytest.fixture(scope="module")
async def approved(gateway, spans) -> dict:
    """One submit_order, approved and committed; the spans are this call's alone. Returns its pending view."""
    async with client(gateway, "trace-req", "requester") as requester, \
            client(gateway, "trace-appr", "approver") as approver:
        session_id = (await requester.post("/v1/sessions", json={})).json()["session_id"]
        drafted = await requester.post(f"/v1/sessions/{session_id}/tool-calls", json={
            "tool": "create_order_draft",
            "arguments": {"customer_id": "C-1001", "lines": [{"sku": "SKU-PAPER-A3", "qty": 1}]}})
        revision = drafted.json()["result"]
        spans.clear()  # from here on: the write alone

        submitted = await requester.post(f"/v1/sessions/{session_id}/tool-calls", json={
            "tool": "submit_order", "arguments": {"draft_id": revision["draft_id"], "revision": revision["revision"]}})
        assert submitted.status_code == 202, submitted.text
        pending = submitted.json()
        decided = await approver.post(f"/v1/approvals/{pending['pending_id']}/decision",
                                      json={"action": "approve", "fingerprint": pending["fingerprint"]})
        assert decided.status_code == 200, decided.text
        view = await finished_call(requester, session_id, pending["call_id"])
        assert view["outcome"] == "succeeded", view
    return pending


async def test_one_approved_submit_order_is_one_trace_across_every_service(approved, spans):
    pending = approved

    def complete(finished) -> bool:
        names = {s.name for s in finished}
        return {"erp commit", "agent handle OperationStatusV1", "agent handle ApprovalResolvedV1"} <= names

    finished = await spans_until(spans, complete)
    request = http_span(finished, TOOL_CALL_ROUTE)
    call_trace = request.context.trace_id
    in_call = [s for s in finished if s.context.trace_id == call_trace]

    # The tool call's HTTP request is the root; every service's work on the call hangs below it.
    assert [s.name for s in in_call if s.parent is None] == [request.name]
    assert {s.attributes.get("erpilot.service") for s in in_call} >= {"gateway", "agent", "approval", "erp"}
    steps = {s.name: s for s in in_call}
    # Issue 25: the agent prepares; the ERP asks for the approval; the decision sends the commit; the outcome
    # comes back to the agent as the ERP's event.
    for name in ("agent prepare", "erp prepare", "approval request", "approval decide",
                 "agent handle ApprovalResolvedV1", "erp commit", "agent handle OperationStatusV1"):
        assert name in steps, f"{name} is not in the tool call's trace: {sorted(steps)}"
    assert steps["agent prepare"].attributes["erpilot.call_id"] == pending["call_id"]
    assert steps["agent handle OperationStatusV1"].attributes["erpilot.call_id"] == pending["call_id"]
    assert steps["approval decide"].attributes["erpilot.pending_id"] == pending["pending_id"]
    assert steps["erp commit"].attributes["erpilot.pending_id"] == pending["pending_id"]

    # The decision's own HTTP request is a separate trace, linked from the decide step.
    decision = http_span(finished, DECISION_ROUTE)
    assert decision.context.trace_id != call_trace
    assert decision.context.trace_id in {link.context.trace_id for link in steps["approval decide"].links}


def points(reader: InMemoryMetricReader, name: str) -> list:
    data = reader.get_metrics_data()
    return [point for resource in data.resource_metrics for scope in resource.scope_metrics
            for metric in scope.metrics if metric.name == name for point in metric.data.data_points]


async def test_the_commit_and_the_decision_are_measured(approved, measured):
    if measured is None:
        pytest.skip("another test installed the process's meter provider")
    committed = [p for p in points(measured, "erpilot.erp.commit.outcomes")
                 if p.attributes == {"status": "committed", "code": ""}]
    assert committed and committed[0].value >= 1
    latency = [p for p in points(measured, "erpilot.approval.decision.latency")
               if p.attributes == {"tool": "submit_order", "status": "approved"}]
    assert latency and latency[0].count >= 1 and latency[0].sum > 0
    assert [p.value for p in points(measured, "erpilot.approval.pending")], "the pending gauge reports nothing"
